"""The estimate does not depend on the database; writes that cannot be stored answer 503."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_support import (
    bring_database_back,
    count_quotes,
    example_body,
    running_client,
    services_of,
    take_database_away,
)
from fastapi.testclient import TestClient
from sqlalchemy import make_url

from service.quotes.service import NOT_STORED_WARNING, SPOOLED_WARNING

OBSERVATION = {"gpu_j": 5.0, "measured_with": "nvml", "measured_at": "2026-11-22T10:00:00Z"}


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client


def test_estimate_answers_without_a_quote_id(client: TestClient) -> None:
    stored = client.post("/v1/estimate", json=example_body()).json()
    take_database_away(client)
    started = time.monotonic()
    response = client.post("/v1/estimate", json=example_body(), headers={"Idempotency-Key": "k"})
    assert time.monotonic() - started < 5
    assert response.status_code == 200
    body = response.json()
    assert body["quote_id"] is None
    assert NOT_STORED_WARNING in body["warnings"]
    assert body["energy"] == stored["energy"]
    batch = client.post("/v1/estimate/batch", json={"items": [example_body()]}).json()
    assert batch["items"][0]["quote_id"] is None


def test_writes_answer_503_with_retry_after(client: TestClient) -> None:
    quote_id = client.post("/v1/estimate", json=example_body()).json()["quote_id"]
    take_database_away(client)
    response = client.post(f"/v1/quotes/{quote_id}/observations", json=OBSERVATION)
    assert response.status_code == 503
    assert int(response.headers["Retry-After"]) > 0
    assert response.headers["content-type"].startswith("application/problem+json")
    assert client.get("/v1/quotes").status_code == 503


def test_health_is_degraded(client: TestClient) -> None:
    take_database_away(client)
    health = client.get("/v1/health")
    assert health.status_code == 200
    assert health.json()["status"] == "degraded"
    assert health.json()["database"]["reachable"] is False
    assert 'quotes_db_errors_total{operation="health"}' in client.get("/metrics").text


@pytest.mark.skipif(bool(os.environ.get("TEST_DATABASE_URL")), reason="SQLite locking")
def test_a_locked_database_is_waited_on_for_a_bounded_time(database_url: str) -> None:
    path = make_url(database_url).database
    assert path is not None
    with running_client(database_url, sqlite_busy_timeout_ms=200) as client:
        quote_id = client.post("/v1/estimate", json=example_body()).json()["quote_id"]
        blocker = sqlite3.connect(path, timeout=0.1, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            started = time.monotonic()
            response = client.post("/v1/estimate", json=example_body())
            assert time.monotonic() - started < 3
            assert response.status_code == 200 and response.json()["quote_id"] is None
            observed = client.post(f"/v1/quotes/{quote_id}/observations", json=OBSERVATION)
            assert observed.status_code == 503 and "Retry-After" in observed.headers
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert client.post("/v1/estimate", json=example_body()).json()["quote_id"]


def test_spooled_quotes_keep_their_id_and_are_replayed(database_url: str, tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    with running_client(database_url, spool_dir=spool_dir, spool_replay_interval_s=0.2) as client:
        services = services_of(client)
        real_engine = services.database.engine
        take_database_away(client)
        headers = {"Idempotency-Key": "spooled-1"}
        body = client.post("/v1/estimate", json=example_body(), headers=headers).json()
        assert body["quote_id"] is not None
        assert SPOOLED_WARNING in body["warnings"]
        again = client.post("/v1/estimate", json=example_body(), headers=headers).json()
        assert again["quote_id"] == body["quote_id"]
        assert list(spool_dir.glob("*.jsonl"))
        services.database.engine = real_engine
        services.database.sessions.configure(bind=real_engine)
        deadline = time.monotonic() + 5
        while list(spool_dir.glob("*.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not list(spool_dir.glob("*.jsonl"))
        stored = client.get(f"/v1/quotes/{body['quote_id']}")
        assert stored.status_code == 200
        assert stored.json()["response"]["energy"] == body["energy"]


def test_a_key_spooled_and_not_yet_replayed_answers_its_spooled_quote(
    database_url: str, tmp_path: Path
) -> None:
    """The database is back (and, on SQLite, the loop's pause after the failed commit over) but
    the spool not yet replayed (its next replay a minute away): the key's retry is answered
    from the spool, not priced and stored as a second quote."""
    spool_dir = tmp_path / "spool"
    with running_client(database_url, spool_dir=spool_dir, spool_replay_interval_s=60) as client:
        take_database_away(client)
        headers = {"Idempotency-Key": "spooled-then-back"}
        spooled = client.post("/v1/estimate", json=example_body(), headers=headers).json()
        assert SPOOLED_WARNING in spooled["warnings"]
        bring_database_back(client, database_url)
        sink = services_of(client).quotes.sink
        time.sleep(max(0.0, getattr(sink, "_paused_until", 0.0) - time.monotonic()))  # SQLite
        again = client.post("/v1/estimate", json=example_body(), headers=headers).json()
        assert again["quote_id"] == spooled["quote_id"]
        assert list(spool_dir.glob("*.jsonl"))  # not replayed yet
    assert count_quotes(database_url, tenant="dev", idempotency_key="spooled-then-back") == 0
