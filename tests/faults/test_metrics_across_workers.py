"""Under `uvicorn --workers 2` with PROMETHEUS_MULTIPROC_DIR set, every scrape of /metrics shows
the instance's counts, whichever worker answers it: no false resets, no undercounts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from api_support import example_body
from prometheus_client.parser import text_string_to_metric_families
from uvicorn_support import REPOSITORY, free_port, worker_settings

ESTIMATES = 24
SCRAPES = 12


@contextmanager
def two_workers(settings: dict[str, str], log_path: Path) -> Iterator[str]:
    """`uvicorn --workers 2` in its own process group (stopped whole), its URL once up."""
    port = free_port()
    command = [
        sys.executable, "-m", "uvicorn", "service.main:app", "--workers", "2",
        "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
    ]  # fmt: skip
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY), **settings}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command, cwd=REPOSITORY, env=environment, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            try:
                httpx.get(f"{url}/v1/health/live", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        time.sleep(2.0)  # the second worker is up too (both load the same catalogues)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def estimates_counted(text: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "quotes_estimates_total"
    )


def test_every_scrape_counts_both_workers(database_url: str, tmp_path: Path) -> None:
    shared = tmp_path / "metrics"
    shared.mkdir()
    settings = worker_settings(database_url, PROMETHEUS_MULTIPROC_DIR=str(shared))
    with two_workers(settings, tmp_path / "uvicorn.log") as url:
        for _ in range(ESTIMATES):  # a new connection each: the workers share the accepts
            with httpx.Client(base_url=url, timeout=30) as client:
                assert client.post("/v1/estimate", json=example_body()).status_code == 200
        counts = set()
        for _ in range(SCRAPES):
            with httpx.Client(base_url=url, timeout=10) as client:
                counts.add(estimates_counted(client.get("/metrics").text))
        writers = {path.name.split("_")[-1] for path in shared.glob("*.db")}
    assert counts == {float(ESTIMATES)}
    assert len(writers) >= 2  # files of both worker processes (pid-named) were summed
