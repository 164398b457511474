"""The SQLite file moved away or replaced under a running app (an operator's `mv`): the
connections opened on the old file must not go on committing to it, nobody reads it. The next
quote is spooled (not answered as stored), and once a file is at the path again the app
reconnects and stores new quotes in it (service/db/sqlite_guard.py)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest
from api_support import count_quotes_by_id, example_body, running_client, services_of
from fastapi.testclient import TestClient

from service.db import migrate
from service.db.sqlite_guard import OPENED_ON, file_identity

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("TEST_DATABASE_URL")), reason="the SQLite file is moved"
)


def estimate_id(client: TestClient) -> str | None:
    answer = client.post("/v1/estimate", json=example_body())
    assert answer.status_code == 200, answer.text
    quote_id = answer.json()["quote_id"]
    assert quote_id is None or isinstance(quote_id, str)
    return quote_id


def spooled_ids(spool_dir: Path) -> str:
    return "".join(path.read_text() for path in spool_dir.glob("*.jsonl"))


def ids_in(database: Path, quote_ids: list[str]) -> set[str]:
    """Which of `quote_ids` the file at `database` holds, read by a connection of its own."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        marks = ",".join("?" * len(quote_ids))
        rows = connection.execute(f"SELECT id FROM quotes WHERE id IN ({marks})", quote_ids)
        return {row[0] for row in rows}
    finally:
        connection.close()


def stored_id(client: TestClient, spool_dir: Path) -> str:
    """Estimates until one is stored, not spooled (the in-loop sink pauses after a refusal)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        quote_id = estimate_id(client)
        if quote_id is not None and quote_id not in spooled_ids(spool_dir):
            return quote_id
        time.sleep(0.05)
    raise AssertionError("no quote was stored in the file at the path")


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "quotes.sqlite3"
    migrate.upgrade(f"sqlite:///{path}")
    return path


def test_a_file_moved_away_spools_the_next_quote_and_a_fresh_file_gets_the_new_ones(
    database: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{database}"
    spool_dir = tmp_path / "spool"
    # Replay slower than the test, so what is spooled stays visible in the spool.
    with running_client(url, spool_dir=spool_dir, spool_replay_interval_s=600) as client:
        before = estimate_id(client)
        assert before is not None and count_quotes_by_id(url, [before]) == 1

        database.rename(tmp_path / "moved.sqlite3")
        during = estimate_id(client)
        # Answered with an id only because it is in the spool, not committed to the moved file.
        assert during is not None and during in spooled_ids(spool_dir)
        health = client.get("/v1/health").json()
        assert health["status"] == "degraded"
        assert "missing" in health["database"]["problem"]
        assert not database.exists()  # the app made no empty database at the path

        migrate.upgrade(url)  # the operator puts a fresh database in place
        after = stored_id(client, spool_dir)
        assert ids_in(database, [before, during, after]) == {after}
        assert client.get("/v1/health").json()["status"] == "ok"


def test_a_file_replaced_by_a_backup_copy_gets_the_new_quotes(
    database: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{database}"
    spool_dir = tmp_path / "spool"
    backup = tmp_path / "backup.sqlite3"
    with running_client(url, spool_dir=spool_dir, spool_replay_interval_s=600) as client:
        in_backup = estimate_id(client)
        assert in_backup is not None
        source, copy = sqlite3.connect(database), sqlite3.connect(backup)
        source.backup(copy)  # as `sqlite3 quotes.sqlite3 ".backup backup.sqlite3"`
        source.close()
        copy.close()
        since_backup = estimate_id(client)
        assert since_backup is not None and count_quotes_by_id(url, [since_backup]) == 1

        os.replace(backup, database)  # the operator restores the backup: mv backup quotes
        after = stored_id(client, spool_dir)
        assert {in_backup, after} <= ids_in(database, [in_backup, since_backup, after])
        # The engines' connections and the event loop's are on the replacement, none on the
        # old file. (What the replacement shows of the quotes committed between backup and
        # restore depends on the old file's WAL, which SQLite pairs with it by name.)
        database_ = services_of(client).database
        replacement = file_identity(database)
        assert database_.sqlite_guard is not None
        assert database_.sqlite_guard.opened_on == replacement
        held = services_of(client).quotes.sink._held_inserts
        assert held is not None and held._held is not None
        assert held._held.info[OPENED_ON] == replacement
        check = sqlite3.connect(database)
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        check.close()
