"""With PROMETHEUS_MULTIPROC_DIR set, /metrics adds up every worker process's counts, so a scrape
that reaches any one worker sees the instance's totals (not that worker's share)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

# One worker: counts 2 quotes (10 J, 0.5 g each call) and one request, then exits.
WORKER = """
from service.metrics import Metrics
metrics = Metrics()
metrics.count_quotes("acme", "meta-llama/Llama-3.1-8B-Instruct", "L4", 2, 10.0, 0.5)
metrics.observe_request("/v1/estimate", "POST", 200, 0.004)
"""
SCRAPE = (
    "import sys; from service.metrics import Metrics; "
    "sys.stdout.buffer.write(Metrics().exposition())"
)


def run(code: str, directory: Path) -> bytes:
    environment = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, check=True, timeout=60
    )
    return done.stdout


def samples(text: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
    }


def test_a_scrape_adds_up_every_workers_counts(tmp_path: Path) -> None:
    for _ in range(3):  # three worker processes, each with its own pid and files
        run(WORKER, tmp_path)
    scraped = samples(run(SCRAPE, tmp_path))
    quote = frozenset(
        {"tenant": "acme", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "L4"}.items()
    )
    assert scraped[("quotes_estimates_total", quote)] == 6.0
    assert scraped[("quotes_quoted_gpu_joules_total", quote)] == 30.0
    assert scraped[("quotes_quoted_co2e_grams_total", quote)] == 1.5
    request = frozenset({"route": "/v1/estimate", "method": "POST", "status": "200"}.items())
    assert scraped[("quotes_http_requests_total", request)] == 3.0
    assert scraped[("quotes_http_request_duration_seconds_count", request)] == 3.0


def test_without_the_directory_a_scrape_is_this_process_alone(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    code = WORKER + "import sys; sys.stdout.buffer.write(metrics.exposition())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, check=True, timeout=60
    )
    scraped = samples(done.stdout)
    quote = frozenset(
        {"tenant": "acme", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "L4"}.items()
    )
    assert scraped[("quotes_estimates_total", quote)] == 2.0
    assert list(tmp_path.iterdir()) == []  # nothing written outside multiprocess mode
