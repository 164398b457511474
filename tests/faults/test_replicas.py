"""Two replicas, real uvicorn processes, on one PostgreSQL database (skipped without
TEST_DATABASE_URL): an Idempotency-Key sent to both is one quote, and one in flight on a replica
is a 409 on the other; a key's rate limit is one quota over both; a calibration made current or
rolled back through one is priced with by the other within QUOTES_CALIBRATION_REFRESH_S."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest
from api_support import bearer, create_key, example_body
from sqlalchemy import Engine, create_engine, func, select, text
from uvicorn_support import Worker, running_worker, worker_settings

from service.api.keys import key_prefix
from service.catalog.engines import DEFAULT_ENGINE
from service.db.base import utc_now
from service.db.tables import TENANT_SCOPE, Calibration, IdempotencyClaim, Quote
from service.pricing.calibration import (
    PARAMETERS,
    Corrections,
    GpuFit,
    HeldOutError,
    SegmentCorrection,
)

if not os.environ.get("TEST_DATABASE_URL"):
    pytest.skip("replicas share a PostgreSQL database (TEST_DATABASE_URL)", allow_module_level=True)

TENANT = "replicas"
REFRESH_S = 1.0  # QUOTES_CALIBRATION_REFRESH_S of both replicas
QUOTA = 6  # the rate-limited key's estimates per window, over both replicas
WINDOW_S = 3600


@dataclass(frozen=True)
class Replicas:
    one: Worker
    other: Worker
    key: str  # estimate, billing and admin for TENANT
    limited_key: str  # estimate only, QUOTA per window


@pytest.fixture(scope="module")
def replicas(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    key = create_key(database_url, TENANT, "estimate,billing,admin")
    limited_key = create_key(database_url, TENANT, "estimate")
    settings = worker_settings(
        database_url,
        QUOTES_CALIBRATION_REFRESH_S=str(REFRESH_S),
        QUOTES_RATE_LIMIT_WINDOW_S=str(WINDOW_S),
        QUOTES_RATE_LIMIT_KEY_QUOTAS=f'{{"{key_prefix(limited_key)}": {QUOTA}}}',
        # An insert held up by a locked table waits up to 4 s: the in-flight test's window.
        QUOTES_DB_STATEMENT_TIMEOUT_MS="4000",
        QUOTES_IDEMPOTENCY_LEASE_S="10",
    )
    logs = tmp_path_factory.mktemp("replicas")
    with (
        running_worker(settings, logs / "one.log") as one,
        running_worker(settings, logs / "other.log") as other,
    ):
        yield Replicas(one, other, key, limited_key)


def estimate(worker: Worker, key: str, idempotency_key: str | None = None) -> httpx.Response:
    headers = bearer(key)
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    return httpx.post(f"{worker.url}/v1/estimate", json=example_body(), headers=headers, timeout=10)


def test_one_idempotency_key_sent_to_both_replicas_is_one_quote(replicas: Replicas) -> None:
    first = estimate(replicas.one, replicas.key, "same-key")
    again = estimate(replicas.other, replicas.key, "same-key")
    assert first.status_code == again.status_code == 200
    assert first.json()["quote_id"] is not None
    assert again.json()["quote_id"] == first.json()["quote_id"]


def test_keys_raced_on_both_replicas_are_one_quote_each(
    replicas: Replicas, database_url: str
) -> None:
    """20 keys, each sent to both replicas at once (a 409 retried after a pause): both callers
    of a key get the same quote id, and the database holds one quote per key."""

    def until_answered(worker: Worker, idempotency_key: str) -> str:
        for _ in range(50):
            answer = estimate(worker, replicas.key, idempotency_key)
            if answer.status_code != 409:
                assert answer.status_code == 200, answer.text
                quote_id: str = answer.json()["quote_id"]
                return quote_id
            time.sleep(0.05)
        raise AssertionError(f"{idempotency_key} still in flight")

    keys = [f"raced-{number}" for number in range(20)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        on_one = pool.map(lambda k: until_answered(replicas.one, k), keys)
        on_other = pool.map(lambda k: until_answered(replicas.other, k), keys)
        pairs = list(zip(on_one, on_other, strict=True))
    assert all(a == b and a is not None for a, b in pairs), pairs
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            stored = connection.execute(
                select(Quote.idempotency_key, func.count())
                .where(Quote.idempotency_key.like("raced-%"))
                .group_by(Quote.idempotency_key)
            ).all()
    finally:
        engine.dispose()
    assert sorted(stored) == sorted((k, 1) for k in keys)


def test_a_key_in_flight_on_one_replica_is_409_on_the_other(
    replicas: Replicas, database_url: str
) -> None:
    """Replica one claims the key and prices, then waits to insert (the quotes table is locked
    against writes); meanwhile the other answers 409 with Retry-After. Once the lock goes, one
    answers its quote and the other's retry answers the same id."""
    engine = create_engine(database_url)
    answers: list[httpx.Response] = []
    try:
        with engine.connect() as blocker:
            blocker.execute(text("LOCK TABLE quotes IN EXCLUSIVE MODE"))  # reads still pass
            in_flight = threading.Thread(
                target=lambda: answers.append(estimate(replicas.one, replicas.key, "in-flight"))
            )
            in_flight.start()
            deadline = time.monotonic() + 5
            while not claimed(engine, "in-flight") and time.monotonic() < deadline:
                time.sleep(0.02)
            refused = estimate(replicas.other, replicas.key, "in-flight")
            blocker.rollback()  # the lock goes
        in_flight.join(timeout=10)
    finally:
        engine.dispose()
    assert refused.status_code == 409, refused.text
    assert refused.headers["Retry-After"] == "1"
    (first,) = answers
    assert first.status_code == 200 and first.json()["quote_id"] is not None
    retried = estimate(replicas.other, replicas.key, "in-flight")
    assert retried.json()["quote_id"] == first.json()["quote_id"]


def claimed(engine: Engine, idempotency_key: str) -> bool:
    """Whether a replica holds a claim on `idempotency_key` (it is pricing under it)."""
    with engine.connect() as connection:
        statement = select(func.count()).where(IdempotencyClaim.idempotency_key == idempotency_key)
        return bool(connection.execute(statement).scalar_one())


def test_the_rate_limit_is_one_quota_over_both_replicas(replicas: Replicas) -> None:
    """QUOTA estimates per window for the key, alternating replicas, counting down r=5..0; the
    next is 429 on either replica, with Retry-After the window's end."""
    seconds_into_window = time.time() % WINDOW_S  # windows are aligned on the clock
    if WINDOW_S - seconds_into_window < 30:  # too close to the window's end: wait for the next
        time.sleep(WINDOW_S - seconds_into_window + 1)
    workers = [replicas.one, replicas.other]
    answers = [estimate(workers[i % 2], replicas.limited_key) for i in range(QUOTA + 2)]
    assert [a.status_code for a in answers] == [200] * QUOTA + [429, 429]
    remaining = [a.headers["RateLimit"].split(";")[1] for a in answers]
    assert remaining == [f"r={r}" for r in range(QUOTA - 1, -1, -1)] + ["r=0", "r=0"]
    for refused in answers[QUOTA:]:
        assert 1 <= int(refused.headers["Retry-After"]) <= WINDOW_S
        assert refused.json()["type"].endswith("/rate-limited")


def test_a_calibration_switch_reaches_the_other_replica_within_the_refresh(
    replicas: Replicas, database_url: str
) -> None:
    """Made current through replica one: one prices with it at once, the other within
    REFRESH_S of the answer. Rolled back through the other: it prices without it at once, one
    within REFRESH_S."""
    plain = estimate(replicas.one, replicas.key).json()
    stored_calibration(database_url, "c_replicas", plain["model_version"], factor=1.5)
    activated = httpx.post(
        f"{replicas.one.url}/v1/calibrations/c_replicas/activate",
        headers=bearer(replicas.key),
        timeout=10,
    )
    assert activated.status_code == 200, activated.text
    switched_at = time.monotonic()
    assert calibration_of(replicas.one, replicas.key) == ("c_replicas", 1.5)
    seen_after_s = seconds_until(replicas.other, replicas.key, ("c_replicas", 1.5), switched_at)
    assert seen_after_s <= REFRESH_S + 0.5  # the bound, and the time to answer

    rolled_back = httpx.post(
        f"{replicas.other.url}/v1/calibrations/rollback", headers=bearer(replicas.key), timeout=10
    )
    assert rolled_back.status_code == 200, rolled_back.text
    switched_at = time.monotonic()
    assert calibration_of(replicas.other, replicas.key) == (None, 1.0)
    seen_after_s = seconds_until(replicas.one, replicas.key, (None, 1.0), switched_at)
    assert seen_after_s <= REFRESH_S + 0.5


def calibration_of(worker: Worker, key: str) -> tuple[str | None, float]:
    quoted = estimate(worker, key).json()
    return quoted["calibration_id"], round(quoted["energy"]["calibration_factor"], 6)


def seconds_until(
    worker: Worker, key: str, expected: tuple[str | None, float], since: float
) -> float:
    """Seconds from `since` until `worker` quotes with `expected` (polled every 50 ms)."""
    while calibration_of(worker, key) != expected:
        assert time.monotonic() - since < 5 * REFRESH_S, f"{expected} never seen"
        time.sleep(0.05)
    return time.monotonic() - since


def stored_calibration(database_url: str, calibration_id: str, version: str, factor: float) -> None:
    """A tenant calibration (not yet current) multiplying the energy of the example's quotes
    (H100, the default engine, llama) by `factor`: an active refit that moves nothing and the
    llama segment's factor on top."""
    log_factor = math.log(factor)
    pooled = SegmentCorrection("*", "*", 10, log_factor, 0.0, 0.0)
    gpu = "H100-SXM5-80GB"
    llama = SegmentCorrection(gpu, "llama", 10, log_factor, 1.0, log_factor)
    fit = GpuFit(gpu, DEFAULT_ENGINE, 10, 0, (0.0,) * len(PARAMETERS), HeldOutError(), True, "")
    corrections = Corrections(10.0, pooled, {(gpu, "llama"): llama}, {(gpu, DEFAULT_ENGINE): fit})
    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                Calibration.__table__.insert().values(
                    id=calibration_id,
                    created_at=utc_now(),
                    payload={  # as a fit stores it: corrections, settings, counts
                        "corrections": corrections.to_payload(),
                        "settings": {"shrinkage_k": 10.0},
                        "observations": dict.fromkeys(
                            (
                                "total",
                                "other_model_version",
                                "out_of_range",
                                "outliers",
                                "fitted",
                                "held_out",
                            ),
                            0,
                        ),
                    },
                    is_current=False,
                    tenant=TENANT,
                    scope=TENANT_SCOPE,
                    model_version=version,
                )
            )
    finally:
        engine.dispose()
