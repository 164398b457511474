"""Rate limits shared in PostgreSQL (service/db/rate_limit_windows.py) and leased from by each
process (service/api/rate_limit_leases.py): the counts of one key add up across limiters (as
across replicas), leases take 1/16 of what is left, a spent window is refused from memory, old
windows are deleted, and a database that cannot be reached fails open to the in-process
counters."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from service.api.rate_limit import Policy, RateLimiter
from service.config import Settings
from service.db.rate_limit_windows import SharedRateWindows

UNREACHABLE = "postgresql+psycopg://nobody:nothing@127.0.0.1:1/none"


def shared_windows(url: str) -> SharedRateWindows:
    return SharedRateWindows(Settings(database_url=url, db_connect_timeout_s=1.0))


@pytest.fixture
def windows(postgres_url: str) -> Iterator[SharedRateWindows]:
    engine = create_engine(postgres_url)
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM rate_limit_windows"))
    engine.dispose()
    windows = shared_windows(postgres_url)
    yield windows
    windows.dispose()


def test_counts_add_up_per_key_and_policy_and_say_when_the_window_ends(
    windows: SharedRateWindows,
) -> None:
    counts = [windows.count("k1", "estimate", 3600, n=n, keep_s=7200) for n in (1, 1, 5)]
    assert [c.count for c in counts] == [1, 2, 7]
    assert all(0 < c.left_s <= 3600 for c in counts)
    assert all(c.window_start_s % 3600 == 0 for c in counts)
    assert windows.count("k2", "estimate", 3600, keep_s=7200).count == 1  # per key
    assert windows.count("k1", "billing", 3600, keep_s=7200).count == 1  # per policy


def test_two_limiters_on_one_database_share_the_quota(
    windows: SharedRateWindows, postgres_url: str
) -> None:
    """Two replicas' limiters: a quota of 5 per hour admits 5 requests over both, alternating,
    and refuses the sixth whichever replica counts it, with r=0 and t up to the hour's end."""
    other = shared_windows(postgres_url)
    errors: list[int] = []
    limiters = []
    for store in (windows, other):
        limiter = RateLimiter({"estimate": Policy("estimate", 5, 3600)})
        limiter.share(store, lambda: errors.append(1))
        limiters.append(limiter)
    try:
        decisions = [limiters[i % 2].check("shared", "estimate") for i in range(7)]
    finally:
        other.dispose()
    assert [d.allowed for d in decisions if d] == [True] * 5 + [False, False]
    assert [d.remaining for d in decisions if d] == [4, 3, 2, 1, 0, 0, 0]
    assert all(d is not None and 1 <= d.reset_s <= 3600 for d in decisions)
    assert errors == []


def test_windows_long_over_are_deleted(windows: SharedRateWindows, postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO rate_limit_windows VALUES "
                "('old', 'estimate', 1000, 7), ('recent', 'estimate', "
                "floor(extract(epoch FROM now()))::bigint - 30, 2)"
            )
        )
    assert windows.prune(keep_s=60) == 1  # the window of 1970 goes, the one 30 s old stays
    with engine.connect() as connection:
        keys = connection.execute(text("SELECT key_id FROM rate_limit_windows")).scalars().all()
    engine.dispose()
    assert keys == ["recent"]


def test_counting_prunes_when_due(windows: SharedRateWindows, postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO rate_limit_windows VALUES ('old', 'admin', 60, 1)"))
    pruning = SharedRateWindows(Settings(database_url=postgres_url), prune_every_s=0.0)
    try:
        pruning.count("k", "admin", 1, keep_s=2)  # due at every count
    finally:
        pruning.dispose()
    with engine.connect() as connection:
        keys = connection.execute(text("SELECT key_id FROM rate_limit_windows")).scalars().all()
    engine.dispose()
    assert keys == ["k"]


def test_an_unreachable_database_fails_open_to_the_process_counters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No exception: each check falls back to this process's window (quota 2: two admitted,
    the third refused), each failure is reported, and the outage is logged once. With a retry
    time, the process counts on its own that long after a failure without asking again."""
    windows = shared_windows(UNREACHABLE)
    errors: list[int] = []
    limiter = RateLimiter({"estimate": Policy("estimate", 2, 3600)})
    limiter.share(windows, lambda: errors.append(1))
    patient = RateLimiter({"estimate": Policy("estimate", 2, 3600)})
    patient.share(windows, lambda: errors.append(10), retry_s=3600.0)
    try:
        decisions = [limiter.check("k", "estimate") for _ in range(3)]
        patient_decisions = [patient.check("k", "estimate") for _ in range(3)]
    finally:
        windows.dispose()
    assert [d.allowed for d in decisions if d] == [True, True, False]
    assert [d.allowed for d in patient_decisions if d] == [True, True, False]
    assert errors == [1, 1, 1, 10]
    outage_lines = [r for r in caplog.records if "shared rate limits unavailable" in r.message]
    assert len(outage_lines) == 2  # once per limiter


def counted(url: str, key: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            statement = text("SELECT sum(count) FROM rate_limit_windows WHERE key_id = :k")
            return int(connection.execute(statement, {"k": key}).scalar_one())
    finally:
        engine.dispose()


def two_limiters(
    windows: SharedRateWindows, other: SharedRateWindows, quota: int
) -> tuple[RateLimiter, RateLimiter]:
    limiters = []
    for store in (windows, other):
        limiter = RateLimiter({"estimate": Policy("estimate", quota, 3600)})
        limiter.share(store, lambda: None)
        limiters.append(limiter)
    return limiters[0], limiters[1]


def remaining(limiter: RateLimiter) -> int:
    decision = limiter.check("leased", "estimate")
    assert decision is not None and decision.allowed
    return decision.remaining


def test_leases_take_a_sixteenth_of_what_the_window_has_left(
    windows: SharedRateWindows, postgres_url: str
) -> None:
    """Quota 64: one takes 4 (64 // 16), the other 4 more; one's next three come from memory
    (the count stays 8); its fifth leases (64 - 4) // 16 = 3, what it knew was left. `r` is
    what is unleased as last seen plus the process's own unused lease."""
    other = shared_windows(postgres_url)
    one, two = two_limiters(windows, other, quota=64)
    try:
        assert remaining(one) == 60 + 3 and counted(postgres_url, "leased") == 4
        assert remaining(two) == 56 + 3 and counted(postgres_url, "leased") == 8
        assert [remaining(one) for _ in range(3)] == [62, 61, 60]
        assert counted(postgres_url, "leased") == 8
        assert remaining(one) == 53 + 2 and counted(postgres_url, "leased") == 11
    finally:
        other.dispose()


def test_a_spent_window_is_refused_from_memory(
    windows: SharedRateWindows, postgres_url: str
) -> None:
    """Quota 2 over two limiters: the third request's lease finds nothing left; from then on
    neither asks the database again in this window (the count stays 3)."""
    other = shared_windows(postgres_url)
    one, two = two_limiters(windows, other, quota=2)
    try:
        outcomes = [limiter.check("leased", "estimate") for limiter in (one, two, one, one, two)]
    finally:
        other.dispose()
    assert [d.allowed for d in outcomes if d] == [True, True, False, False, False]
    assert counted(postgres_url, "leased") == 3


def test_threads_finding_no_lease_at_once_share_one(
    windows: SharedRateWindows, postgres_url: str
) -> None:
    """32 threads ask at the same moment under a quota of 1600 with no lease yet: one leases
    100 (1600 // 16), the others wait for it and are admitted from it; the shared count is
    100, not 32 leases' worth (3,200, twice the quota, which would refuse most of them)."""
    limiter = RateLimiter({"estimate": Policy("estimate", 1600, 3600)})
    limiter.share(windows, lambda: None)
    start = threading.Barrier(32)
    decisions: list[bool] = []

    def ask() -> None:
        start.wait()
        decision = limiter.check("leased", "estimate")
        decisions.append(decision is not None and decision.allowed)

    threads = [threading.Thread(target=ask) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert decisions == [True] * 32
    assert counted(postgres_url, "leased") == 100
