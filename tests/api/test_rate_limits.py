"""Per-key rate limits: the limiter's arithmetic on a hand-driven clock, then through HTTP
with q=5 per hour-long window (on PostgreSQL counted in the database, shared by replicas):
five answers counting down r=4..0, the sixth a 429 problem with Retry-After, every keyed answer
(errors included) with the IETF headers."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from api_support import bearer, create_key, example_body, running_client
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from service.api.rate_limit import Policy, RateLimiter, build_rate_limiter
from service.config import Settings

UNREACHABLE = "postgresql+psycopg://nobody:nothing@127.0.0.1:1/none"


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def test_fixed_window_counts_down_refuses_and_resets() -> None:
    clock = Clock()
    limiter = RateLimiter({"estimate": Policy("estimate", 3, 10)}, clock=clock)
    seen = []
    for _ in range(4):
        decision = limiter.check("k1", "estimate")
        assert decision is not None
        seen.append((decision.allowed, decision.remaining, decision.reset_s))
        clock.now_s += 2.5
    # window opened at 1000.0 for 10 s: resets at 1010.0, i.e. in 10, 7.5, 5 and 2.5 s (ceil)
    assert seen == [(True, 2, 10), (True, 1, 8), (True, 0, 5), (False, 0, 3)]
    assert limiter.check("k2", "estimate").allowed  # type: ignore[union-attr]  # per key
    clock.now_s = 1010.0  # window over: a fresh one
    decision = limiter.check("k1", "estimate")
    assert decision is not None and (decision.allowed, decision.remaining) == (True, 2)


def test_headers_are_the_draft_structured_fields() -> None:
    limiter = RateLimiter({"billing": Policy("billing", 100, 60)}, clock=Clock())
    decision = limiter.check("k", "billing")
    assert decision is not None
    assert decision.raw_headers() == [
        (b"ratelimit-policy", b'"billing";q=100;w=60'),
        (b"ratelimit", b'"billing";r=99;t=60'),
    ]


def test_a_fresh_window_resets_in_its_whole_length_whatever_the_clock_reads() -> None:
    # (1000.1 + 3600) - 1000.1 is 3600.0000000000005 in floating point: its ceiling, 3601 s,
    # would promise a reset later than the window's own end
    clock = Clock()
    clock.now_s = 1000.1
    limiter = RateLimiter({"estimate": Policy("estimate", 5, 3600)}, clock=clock)
    decision = limiter.check("k", "estimate")
    assert decision is not None and decision.reset_s == 3600


def test_unconfigured_policies_are_unlimited_and_key_quotas_override() -> None:
    limiter = RateLimiter({"estimate": Policy("estimate", 10, 1)}, {"vip": 2}, clock=Clock())
    assert limiter.check("anyone", "admin") is None
    outcomes = [limiter.check("vip", "estimate") for _ in range(3)]
    assert [d.allowed for d in outcomes if d] == [True, True, False]
    assert outcomes[0] is not None and outcomes[0].policy.quota == 2


def test_concurrent_checks_never_admit_more_than_the_quota() -> None:
    limiter = RateLimiter({"estimate": Policy("estimate", 500, 3600)})
    admitted = []
    lock = threading.Lock()

    def hammer() -> None:
        mine = sum(
            bool(d and d.allowed) for d in (limiter.check("k", "estimate") for _ in range(100))
        )
        with lock:
            admitted.append(mine)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(admitted) == 500  # 800 tried


def test_pruning_drops_only_ended_windows() -> None:
    clock = Clock()
    limiter = RateLimiter({"estimate": Policy("estimate", 1, 10)}, clock=clock, prune_above=3)
    for key in ("a", "b", "c"):
        limiter.check(key, "estimate")
    clock.now_s += 11
    limiter.check("d", "estimate")  # table full: a, b, c ended and are dropped
    assert set(limiter._windows) == {("d", "estimate")}
    clock.now_s += 1
    for key in ("e", "f"):
        limiter.check(key, "estimate")
    limiter.check("g", "estimate")  # all live: the table grows instead
    assert len(limiter._windows) == 4 and limiter.prune_above == 6


def test_settings_override_the_default_limits_per_scope() -> None:
    settings = Settings(rate_limits={"estimate": 7, "admin": 0}, rate_limit_window_s=10)
    limiter = build_rate_limiter(settings)
    assert limiter.policies == {
        "estimate": Policy("estimate", 7, 10),
        "billing": Policy("billing", 100, 10),  # the defaults
        "observe": Policy("observe", 500, 10),
    }  # admin: 0, unlimited
    with pytest.raises(ValueError, match="unknown scopes"):
        Settings(rate_limits={"estimates": 7})


@pytest.fixture(scope="module")
def limited(database_url: str) -> Iterator[tuple[TestClient, str, str]]:
    estimator = create_key(database_url, "rl-tenant", "estimate")
    billing = create_key(database_url, "rl-tenant", "billing")
    limits = {"estimate": 5, "billing": 3}
    # An hour: on PostgreSQL windows are aligned to multiples of their length, and one the
    # tests' few requests straddle would start the count again.
    with running_client(database_url, rate_limits=limits, rate_limit_window_s=3600) as client:
        yield client, estimator, billing


def test_the_sixth_estimate_in_a_window_is_429(limited: tuple[TestClient, str, str]) -> None:
    client, key, _ = limited
    answers = [
        client.post("/v1/estimate", json=example_body(), headers=bearer(key)) for _ in range(6)
    ]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 200, 429]
    for answer, remaining in zip(answers, [4, 3, 2, 1, 0, 0], strict=True):
        assert answer.headers["RateLimit-Policy"] == '"estimate";q=5;w=3600'
        value = answer.headers["RateLimit"]
        assert value.startswith(f'"estimate";r={remaining};t=')
        assert 1 <= int(value.rsplit("t=", 1)[1]) <= 3600
    refused = answers[-1]
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem = refused.json()
    assert problem["status"] == 429 and problem["type"].endswith("/rate-limited")
    reset_s = int(refused.headers["RateLimit"].rsplit("t=", 1)[1])
    assert refused.headers["Retry-After"] == str(reset_s)
    # the spent estimate quota does not touch the same tenant's other key, nor other scopes
    _, _, billing = limited
    assert client.get("/v1/quotes", headers=bearer(billing)).status_code == 200


def test_errors_of_a_keyed_request_carry_the_headers_too(
    limited: tuple[TestClient, str, str],
) -> None:
    client, _, billing = limited
    missing = client.get("/v1/quotes/q_nope", headers=bearer(billing))
    assert missing.status_code == 404
    assert missing.headers["RateLimit-Policy"] == '"billing";q=3;w=3600'
    forbidden = client.post("/v1/estimate", json=example_body(), headers=bearer(billing))
    assert forbidden.status_code == 403
    assert forbidden.headers["RateLimit-Policy"] == '"estimate";q=5;w=3600'


def test_public_and_unkeyed_answers_carry_no_rate_limit(
    limited: tuple[TestClient, str, str],
) -> None:
    client, _, _ = limited
    for answer in (client.get("/v1/gpus"), client.get("/v1/quotes")):
        assert "RateLimit" not in answer.headers and "RateLimit-Policy" not in answer.headers


def test_postgres_counts_in_the_database_and_sqlite_per_process(
    limited: tuple[TestClient, str, str], database_url: str
) -> None:
    client, _, _ = limited
    limiter: RateLimiter = client.app.state.rate_limiter  # type: ignore[attr-defined]
    assert (limiter.shared is not None) == database_url.startswith("postgresql")


def test_a_failing_shared_counter_fails_open_and_is_counted(database_url: str) -> None:
    """PostgreSQL: the counters' database unreachable, keyed estimates still answer 200 with
    their RateLimit headers (counted in the process: the third of q=2 is 429), never a 500;
    the failure shows in quotes_db_errors_total{operation="rate_limit"}, and for the reconnect
    back-off (60 s here) the process counts on its own without trying the database again."""
    if not database_url.startswith("postgresql"):
        pytest.skip("shared rate limits are PostgreSQL's")
    key = create_key(database_url, "rl-away", "estimate")
    with running_client(
        database_url,
        rate_limits={"estimate": 2},
        rate_limit_window_s=3600,
        db_reconnect_backoff_s=60.0,
    ) as client:
        limiter: RateLimiter = client.app.state.rate_limiter  # type: ignore[attr-defined]
        assert limiter.shared is not None
        limiter.shared.windows.engine.dispose()
        limiter.shared.windows.engine = create_engine(
            UNREACHABLE, connect_args={"connect_timeout": 1}
        )
        answers = [
            client.post("/v1/estimate", json=example_body(), headers=bearer(key)) for _ in range(3)
        ]
        metrics = client.get("/metrics").text
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0].headers["RateLimit"].startswith('"estimate";r=1;t=')
    assert 'quotes_db_errors_total{operation="rate_limit"} 1.0' in metrics
