"""Under `uvicorn --workers 2` with PROMETHEUS_MULTIPROC_DIR set, every scrape of /metrics shows
the instance's counts, whichever worker answers it: no false resets, no undercounts."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from api_support import example_body
from prometheus_client.parser import text_string_to_metric_families
from uvicorn_support import running_worker, worker_settings

ESTIMATES = 24
SCRAPES = 12


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
    with running_worker(settings, tmp_path / "uvicorn.log", workers=2) as worker:
        url = worker.url
        time.sleep(2.0)  # the second worker is up too (both load the same catalogues)
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
