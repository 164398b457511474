"""The SQLite files made unwritable under a real uvicorn worker (`chattr +i` on the database,
`-wal` and `-shm` files): the worker keeps answering (estimates 200 without a quote id, health
`degraded` naming the file) instead of dying of SIGBUS on its mapping of `-shm`, and once the
files can be written again it stores quotes and reports `ok` without a restart."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from api_support import example_body
from sqlalchemy import make_url
from uvicorn_support import Worker, running_worker, worker_settings

from service.quotes.service import NOT_STORED_WARNING

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("TEST_DATABASE_URL")) or shutil.which("chattr") is None,
    reason="SQLite files made immutable with chattr",
)


@contextmanager
def immutable(paths: list[Path]) -> Iterator[None]:
    made: list[Path] = []
    try:
        for path in paths:
            done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
            if done.returncode != 0:
                pytest.skip(f"chattr +i refused here: {done.stderr.decode().strip()}")
            made.append(path)
        yield
    finally:
        for path in made:
            subprocess.run(["chattr", "-i", str(path)], check=True)


def estimate(client: httpx.Client) -> dict[str, object]:
    answer = client.post("/v1/estimate", json=example_body())
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_unwritable_files_degrade_the_worker_and_it_recovers(
    database_url: str, tmp_path: Path
) -> None:
    database = Path(str(make_url(database_url).database))
    with running_worker(worker_settings(database_url), tmp_path / "uvicorn.log") as worker:
        client = httpx.Client(base_url=worker.url, timeout=10)
        assert estimate(client)["quote_id"]
        files = [database, *(database.with_name(database.name + s) for s in ("-wal", "-shm"))]
        assert all(path.exists() for path in files)
        with immutable(files):
            answers = [estimate(client) for _ in range(20)]
            health = client.get("/v1/health").json()
            assert worker.process.poll() is None, "the worker died"
        assert [a["quote_id"] for a in answers] == [None] * 20
        assert all(NOT_STORED_WARNING in a["warnings"] for a in answers)  # type: ignore[operator]
        assert health["status"] == "degraded"
        assert "cannot be written" in health["database"]["problem"]
        recovered_ids = wait_for_stored_quotes(client, worker)
        assert client.get("/v1/health").json()["status"] == "ok"
        for quote_id in recovered_ids:
            assert client.get(f"/v1/quotes/{quote_id}").status_code == 200
        client.close()


def wait_for_stored_quotes(client: httpx.Client, worker: Worker) -> list[str]:
    """Estimates until three in a row are stored (the sink may pause its first retry)."""
    deadline = time.monotonic() + 10
    stored: list[str] = []
    while len(stored) < 3:
        assert time.monotonic() < deadline, "quotes were not stored again"
        assert worker.process.poll() is None
        quote_id = estimate(client)["quote_id"]
        stored = [*stored, quote_id] if isinstance(quote_id, str) else []
        time.sleep(0.05)
    return stored
