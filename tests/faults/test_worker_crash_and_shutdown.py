"""A real uvicorn worker killed with SIGKILL in a burst of writes loses no answered quote and
stores none twice (callers retry with their Idempotency-Key); SIGTERM lets a request in flight
finish within the grace period before the process exits."""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from api_support import count_quotes, example_body
from locking import database_locked
from sqlalchemy import create_engine, func, select
from uvicorn_support import GRACE_S, running_worker, worker_settings

from service.db.tables import Quote

WRITERS = 6
ANSWERS_BEFORE_KILL = 60


def post_quote(client: httpx.Client, number: int) -> httpx.Response:
    body = example_body(workload={"batch_size": 1 + number % 16, "prompt_tokens": 100 + number,
                                  "output_tokens": 64})  # fmt: skip
    return client.post("/v1/estimate", json=body, headers={"Idempotency-Key": f"burst-{number}"})


def test_sigkill_mid_burst_loses_no_answered_quote_and_stores_none_twice(
    database_url: str, tmp_path: Path
) -> None:
    settings = worker_settings(database_url)
    log = tmp_path / "uvicorn.log"
    answered: dict[int, str] = {}  # request number -> quote id returned to its caller
    unanswered: list[int] = []
    lock = threading.Lock()
    numbers = iter(range(100_000))
    with running_worker(settings, log) as worker:
        killed = threading.Event()

        def write_until_killed() -> None:
            with httpx.Client(base_url=worker.url, timeout=10) as client:
                while not killed.is_set():
                    with lock:
                        number = next(numbers)
                    try:
                        response = post_quote(client, number)
                    except httpx.TransportError:
                        with lock:
                            unanswered.append(number)
                        return
                    assert response.status_code == 200, response.text
                    quote_id = response.json()["quote_id"]
                    assert quote_id is not None, response.json()["warnings"]
                    with lock:
                        answered[number] = quote_id

        with ThreadPoolExecutor(WRITERS) as pool:
            writers = [pool.submit(write_until_killed) for _ in range(WRITERS)]
            while len(answered) < ANSWERS_BEFORE_KILL:
                assert all(not writer.done() for writer in writers), writers[0].result()
                time.sleep(0.01)
            worker.kill()
            killed.set()
            for writer in writers:
                writer.result(timeout=30)
    assert unanswered, "the kill hit no request in flight"

    with running_worker(settings, log) as worker, httpx.Client(base_url=worker.url) as client:
        for quote_id in answered.values():
            stored = client.get(f"/v1/quotes/{quote_id}")
            assert stored.status_code == 200, f"answered quote {quote_id} was lost"
        retried: dict[int, str] = {}
        for number in unanswered:  # the callers retry; a stranded claim expires in 3 s (409)
            deadline = time.monotonic() + 10
            while (response := post_quote(client, number)).status_code == 409:
                assert time.monotonic() < deadline, "a claim stranded by the crash never expired"
                time.sleep(float(response.headers["Retry-After"]))
            assert response.status_code == 200, response.text
            retried[number] = response.json()["quote_id"]
            again = post_quote(client, number).json()["quote_id"]
            assert again == retried[number], "the same key gave a second quote"
    rows_per_key = stored_rows_per_key(database_url)
    for number in [*answered, *unanswered]:
        rows = rows_per_key.get(f"burst-{number}", 0)
        assert rows == 1, f"request {number} is stored {rows} times"
    assert count_quotes(database_url, tenant="dev") >= len(answered) + len(unanswered)


def stored_rows_per_key(database_url: str) -> dict[str, int]:
    """How many quote rows each idempotency key of the dev tenant has, read directly."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            statement = (
                select(Quote.idempotency_key, func.count())
                .where(Quote.tenant == "dev", Quote.idempotency_key.is_not(None))
                .group_by(Quote.idempotency_key)
            )
            return {str(key): int(rows) for key, rows in connection.execute(statement)}
    finally:
        engine.dispose()


def test_sigterm_lets_the_request_in_flight_finish(database_url: str, tmp_path: Path) -> None:
    """The request is held in flight by a write lock taken by the test (SQLite: BEGIN
    IMMEDIATE; PostgreSQL: LOCK TABLE quotes); SIGTERM arrives, the lock is released 1 s later,
    and the request is answered (its quote stored) before the process exits, well within the
    grace period; new connections are refused meanwhile."""
    settings = worker_settings(
        database_url,
        QUOTES_SQLITE_BUSY_TIMEOUT_MS="4000",
        QUOTES_DB_STATEMENT_TIMEOUT_MS="4000",
        QUOTES_IDEMPOTENCY_LEASE_S="10",
    )
    with running_worker(settings, tmp_path / "uvicorn.log") as worker:
        metrics_url = f"{worker.url}/metrics"
        with ThreadPoolExecutor(1) as pool:
            with database_locked(database_url):  # released before the pool is joined
                in_flight = pool.submit(
                    httpx.post, f"{worker.url}/v1/estimate", json=example_body(), timeout=15
                )
                deadline = time.monotonic() + 10  # priced, now waiting for the lock
                while "quotes_estimates_total{" not in httpx.get(metrics_url).text:
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
                worker.terminate()
                signalled = time.monotonic()
                time.sleep(1.0)
                assert worker.process.poll() is None, "the worker exited with a request in flight"
                with pytest.raises(httpx.TransportError):
                    httpx.get(f"{worker.url}/v1/health", timeout=1)
            response = in_flight.result(timeout=10)
        exit_code = worker.process.wait(timeout=GRACE_S + 5)
        exited_after_s = time.monotonic() - signalled
    assert response.status_code == 200, response.text
    assert response.json()["quote_id"] is not None
    assert exit_code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once drained
    assert exited_after_s < GRACE_S, f"shutdown took {exited_after_s:.1f} s"
    assert count_quotes(database_url, tenant="dev") >= 1
