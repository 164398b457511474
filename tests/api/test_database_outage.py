"""The database going away while requests keep coming (open dev mode): estimates keep
answering, writes get a fast 503, and every quote id ever returned is readable afterwards.

On PostgreSQL the app talks to the server through a TCP proxy that is cut and restored; on
SQLite its engine is pointed at a file that cannot be opened and back.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from api_support import Outage, count_quotes, example_body, running_client, services_of
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import create_engine, text

from service.quotes.service import NOT_STORED_WARNING, SPOOLED_WARNING

FAST_S = 3.0  # "fast": well under a gateway's timeout, and bounded
OBSERVATION = {"gpu_j": 5.0, "measured_with": "nvml", "measured_at": "2026-11-22T10:00:00Z"}


@pytest.fixture
def outage(database_url: str) -> Iterator[Outage]:
    controller = Outage(database_url)
    yield controller
    controller.close()


def timed(call: Any, *args: Any, **kwargs: Any) -> tuple[float, Response]:
    started = time.monotonic()
    response = call(*args, **kwargs)
    return time.monotonic() - started, response


def wait_until_healthy(client: TestClient, deadline_s: float = 10.0) -> None:
    deadline = time.monotonic() + deadline_s
    while client.get("/v1/health").json()["status"] != "ok":
        assert time.monotonic() < deadline, "the service did not recover"
        time.sleep(0.05)


def assert_fast_503(elapsed_s: float, response: Response) -> None:
    assert response.status_code == 503, response.text
    assert elapsed_s < FAST_S, f"503 took {elapsed_s:.2f} s"
    assert int(response.headers["Retry-After"]) > 0
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["type"].endswith("/database-unavailable")


@pytest.mark.parametrize("spool", [False, True], ids=["no-spool", "spool"])
def test_an_outage_under_load_gives_fast_503s_and_loses_no_quote(
    outage: Outage, database_url: str, tmp_path: Path, spool: bool
) -> None:
    settings: dict[str, Any] = {"retry_after_s": 2}
    if spool:
        settings |= {"spool_dir": tmp_path / "spool", "spool_replay_interval_s": 0.2}
    with running_client(outage.app_url, **settings) as client:
        before = client.post("/v1/estimate", json=example_body()).json()["quote_id"]
        answers: list[tuple[float, Response]] = []
        stop = threading.Event()

        def keep_quoting() -> None:
            number = 0
            while not stop.is_set():
                key = {"Idempotency-Key": f"outage-{spool}-{number}"} if number % 2 else {}
                answers.append(timed(client.post, "/v1/estimate", json=example_body(), headers=key))
                number += 1
                time.sleep(0.01)

        with ThreadPoolExecutor(1) as pool:
            quoting = pool.submit(keep_quoting)
            time.sleep(0.2)
            outage.begin(client)
            time.sleep(0.2)
            url = f"/v1/quotes/{before}/observations"
            assert_fast_503(*timed(client.post, url, json=OBSERVATION))
            assert_fast_503(*timed(client.get, "/v1/quotes"))
            assert_fast_503(*timed(client.get, f"/v1/quotes/{before}"))
            health = client.get("/v1/health").json()
            assert health["status"] == "degraded" and health["database"]["reachable"] is False
            time.sleep(0.2)
            outage.end(client)
            wait_until_healthy(client)
            time.sleep(0.2)
            stop.set()
            quoting.result(timeout=30)

        assert all(response.status_code == 200 for _, response in answers)
        slowest = max(elapsed for elapsed, _ in answers)
        assert slowest < FAST_S, f"an estimate took {slowest:.2f} s"
        bodies = [response.json() for _, response in answers]
        returned = [body for body in bodies if body["quote_id"] is not None]
        unstored = [body for body in bodies if body["quote_id"] is None]
        if spool:
            assert not unstored
            assert any(SPOOLED_WARNING in body["warnings"] for body in returned)
            spool_dir = settings["spool_dir"]
            deadline = time.monotonic() + 10
            while list(spool_dir.glob("*.jsonl")) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not list(spool_dir.glob("*.jsonl")), "the spool was not replayed"
        else:
            assert unstored, "the outage was not seen"
            assert all(NOT_STORED_WARNING in body["warnings"] for body in unstored)
        assert bodies[-1]["quote_id"] is not None, "quotes are not stored again after recovery"
        for body in returned:
            stored = client.get(f"/v1/quotes/{body['quote_id']}")
            assert stored.status_code == 200, f"quote {body['quote_id']} was lost"
            assert stored.json()["response"]["energy"] == body["energy"]
            assert stored.json()["created_at"] == body["created_at"]
        assert count_quotes(database_url, tenant="dev") >= len(returned) + 1
        observed = client.post(f"/v1/quotes/{before}/observations", json=OBSERVATION)
        assert observed.status_code == 201


def test_a_claim_stranded_by_an_outage_does_not_block_the_retry(
    outage: Outage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is claimed, then the database goes away before the quote is stored: the claim
    cannot be released, yet the caller's retry after recovery is priced, not refused."""
    with running_client(outage.app_url) as client:
        estimator = services_of(client).estimator
        original = estimator.price

        def lose_database_then_price(*args: Any, **kwargs: Any) -> Any:
            outage.begin(client)
            return original(*args, **kwargs)

        monkeypatch.setattr(estimator, "price", lose_database_then_price)
        headers = {"Idempotency-Key": "stranded"}
        lost = client.post("/v1/estimate", json=example_body(), headers=headers)
        assert lost.status_code == 200 and lost.json()["quote_id"] is None
        monkeypatch.setattr(estimator, "price", original)
        outage.end(client)
        wait_until_healthy(client)
        retried = client.post("/v1/estimate", json=example_body(), headers=headers)
        assert retried.status_code == 200, retried.text
        assert retried.json()["quote_id"] is not None


@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("TEST_DATABASE_URL"), reason="TEST_DATABASE_URL not set")
def test_a_locked_table_is_waited_on_for_a_bounded_time(database_url: str) -> None:
    """PostgreSQL up but too slow (a lock held elsewhere): bounded by the statement timeout."""
    with running_client(database_url, db_statement_timeout_ms=300) as client:
        quote_id = client.post("/v1/estimate", json=example_body()).json()["quote_id"]
        engine = create_engine(database_url)
        try:
            with engine.connect() as blocker:
                blocker.execute(text("LOCK TABLE quotes IN ACCESS EXCLUSIVE MODE"))
                elapsed, estimate = timed(client.post, "/v1/estimate", json=example_body())
                assert elapsed < FAST_S
                assert estimate.status_code == 200 and estimate.json()["quote_id"] is None
                url = f"/v1/quotes/{quote_id}/observations"
                assert_fast_503(*timed(client.post, url, json=OBSERVATION))
                blocker.rollback()
        finally:
            engine.dispose()
        assert client.post("/v1/estimate", json=example_body()).json()["quote_id"]


@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("TEST_DATABASE_URL"), reason="TEST_DATABASE_URL not set")
def test_a_hung_database_costs_one_connect_timeout_not_one_per_call(outage: Outage) -> None:
    """PostgreSQL accepts connections and never answers: the first attempt waits out the
    connect timeout (psycopg's minimum is 2 s); then attempts fail at once until a probe,
    one at a time every backoff, finds the server again."""
    settings = {"db_connect_timeout_s": 2.0, "db_reconnect_backoff_s": 1.0}
    with running_client(outage.app_url, **settings) as client:
        quote_id = client.post("/v1/estimate", json=example_body()).json()["quote_id"]
        outage.hang()
        elapsed, first = timed(client.post, "/v1/estimate", json=example_body())
        assert first.status_code == 200 and first.json()["quote_id"] is None
        assert elapsed < 2 * 2.0 + 0.5, f"the first estimate took {elapsed:.2f} s"
        for _ in range(5):
            elapsed, later = timed(client.post, "/v1/estimate", json=example_body())
            assert later.status_code == 200 and elapsed < 0.5, f"{elapsed:.2f} s"
        url = f"/v1/quotes/{quote_id}/observations"
        elapsed, refused = timed(client.post, url, json=OBSERVATION)
        assert_fast_503(elapsed, refused)
        assert elapsed < 0.5
        outage.end(client)
        wait_until_healthy(client)
        assert client.post("/v1/estimate", json=example_body()).json()["quote_id"]
