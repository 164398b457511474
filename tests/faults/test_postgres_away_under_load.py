"""PostgreSQL going away mid-burst under a real uvicorn worker (through a TCP proxy that is cut
and restored; the shared server itself is never stopped), with the spool on: estimates keep
answering (200) within a bound, writes answer 503 + Retry-After, and after recovery every
answered quote id is readable and each request is stored exactly once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from api_support import TcpProxy, count_quotes_by_id, example_body
from sqlalchemy import create_engine, func, make_url, select
from uvicorn_support import running_worker, worker_settings

from service.db.tables import Quote
from service.quotes.service import SPOOLED_WARNING

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not os.environ.get("TEST_DATABASE_URL"), reason="TEST_DATABASE_URL not set"),
]

WRITERS = 4
ESTIMATE_BOUND_S = 3.0  # one connect timeout (1 s) per database call, then the backoff answers
OBSERVATION = {"gpu_j": 5.0, "measured_with": "nvml", "measured_at": "2026-11-22T10:00:00Z"}


@pytest.fixture
def proxy(database_url: str) -> Iterator[TcpProxy]:
    parsed = make_url(database_url)
    forwarder = TcpProxy(parsed.host or "127.0.0.1", parsed.port or 5432)
    yield forwarder
    forwarder.cut()


def rows_per_key(database_url: str, keys: list[str]) -> dict[str, int]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            statement = (
                select(Quote.idempotency_key, func.count())
                .where(Quote.idempotency_key.in_(keys))
                .group_by(Quote.idempotency_key)
            )
            return {str(key): int(rows) for key, rows in connection.execute(statement)}
    finally:
        engine.dispose()


def test_postgres_cut_mid_burst_loses_and_duplicates_nothing(
    database_url: str, proxy: TcpProxy, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    settings = worker_settings(
        proxy.url(database_url),
        QUOTES_SPOOL_DIR=str(spool),
        QUOTES_SPOOL_REPLAY_INTERVAL_S="0.2",
        QUOTES_DB_RECONNECT_BACKOFF_S="0.2",
        QUOTES_RETRY_AFTER_S="2",
    )
    answers: list[tuple[float, str | None, dict[str, object]]] = []  # (s, key, body)
    lock = threading.Lock()
    numbers = iter(range(100_000))
    stop = threading.Event()
    with running_worker(settings, tmp_path / "uvicorn.log") as worker:
        seed = httpx.post(f"{worker.url}/v1/estimate", json=example_body()).json()["quote_id"]

        def write_until_stopped() -> None:
            with httpx.Client(base_url=worker.url, timeout=10) as client:
                while not stop.is_set():
                    with lock:
                        number = next(numbers)
                    key = f"pg-away-{number}" if number % 2 else None
                    headers = {"Idempotency-Key": key} if key else {}
                    started = time.monotonic()
                    response = client.post("/v1/estimate", json=example_body(), headers=headers)
                    assert response.status_code == 200, response.text
                    with lock:
                        answers.append((time.monotonic() - started, key, response.json()))

        def wait_for_answers(count: int) -> None:
            deadline = time.monotonic() + 20
            while len(answers) < count:
                assert time.monotonic() < deadline, "the writers stalled"
                time.sleep(0.01)

        with ThreadPoolExecutor(WRITERS) as pool:
            writers = [pool.submit(write_until_stopped) for _ in range(WRITERS)]
            wait_for_answers(30)
            proxy.cut()
            wait_for_answers(len(answers) + 30)
            refused = httpx.post(f"{worker.url}/v1/quotes/{seed}/observations", json=OBSERVATION)
            proxy.restore()
            wait_for_answers(len(answers) + 60)
            stop.set()
            for writer in writers:
                writer.result(timeout=30)

        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "2"
        slowest_s = max(elapsed for elapsed, _, _ in answers)
        assert slowest_s < ESTIMATE_BOUND_S, f"an estimate took {slowest_s:.2f} s"
        bodies = [body for _, _, body in answers]
        assert all(body["quote_id"] is not None for body in bodies), "a quote was not spooled"
        assert any(SPOOLED_WARNING in body["warnings"] for body in bodies), "no outage seen"
        deadline = time.monotonic() + 15
        while list(spool.glob("*.jsonl")):
            assert time.monotonic() < deadline, "the spool was not replayed"
            time.sleep(0.05)
        with httpx.Client(base_url=worker.url) as client:
            for body in bodies:
                assert client.get(f"/v1/quotes/{body['quote_id']}").status_code == 200
    quote_ids = [str(body["quote_id"]) for body in bodies]
    assert len(set(quote_ids)) == len(quote_ids)
    stored = count_quotes_by_id(database_url, quote_ids)
    assert stored == len(quote_ids), "an answered quote is missing"
    keys = [key for _, key, _ in answers if key is not None]
    per_key = rows_per_key(database_url, keys)
    assert per_key == dict.fromkeys(keys, 1), "a request was stored under two quote ids"
