"""Per-key rate limits: a fixed-window counter per (API key, policy), and the IETF headers.

Each keyed request is counted against one policy, named for the scope its route requires
(`estimate`, `billing`, `observe`, `admin`): at most `q` requests per window of `w` seconds.
Every keyed response carries `RateLimit-Policy: "estimate";q=1000;w=1` and
`RateLimit: "estimate";r=998;t=1` (draft-ietf-httpapi-ratelimit-headers: `r` requests remain,
the window resets in `t` s); past the quota the route answers 429 problem+json with
`Retry-After: t`.

On PostgreSQL (with `rate_limit_shared`) the counters live in the database, shared by every
worker and replica: windows aligned to multiples of `w` on the database's clock
(service/db/rate_limit_windows.py), from which each process leases requests a few at a time
(service/api/rate_limit_leases.py), so a key makes at most q requests per window however many
processes answer it. When a lease fails the limiter fails open: it counts in this process for
the reconnect back-off before it tries a lease again (logged once per outage, each failure
counted in `quotes_db_errors_total{operation="rate_limit"}`), never a 500.

On SQLite (one host), or when a process has no shared counters, they live in this process's
memory: windows starting at the key's first request in them, and with N worker processes a key
may make up to N x q requests per window. One such check is O(1) under a lock, so it is safe
from the thread pool that runs the sync routes.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fastapi import FastAPI
from sqlalchemy import make_url
from sqlalchemy.exc import SQLAlchemyError

from service.api.rate_limit_leases import LeasedWindows
from service.config import Settings
from service.db.rate_limit_windows import SharedRateWindows
from service.errors import ServiceError
from service.metrics import Metrics

logger = logging.getLogger(__name__)

STATE_KEY = "rate_limit"  # where a request's decision waits for the response headers


class RateLimited(ServiceError):
    status, title, type_slug = 429, "Too Many Requests", "rate-limited"


@dataclass(frozen=True, slots=True)
class Policy:
    """At most `quota` requests per `window_s` seconds, under the name `name`."""

    name: str
    quota: int
    window_s: int


@dataclass(frozen=True, slots=True)
class Decision:
    """One request's outcome: `remaining` requests left, `reset_s` seconds until the window ends."""

    policy: Policy
    allowed: bool
    remaining: int
    reset_s: int

    def refusal(self) -> RateLimited:
        """The 429 answered when `allowed` is false."""
        return RateLimited(
            f"rate limit of {self.policy.quota} `{self.policy.name}` requests per "
            f"{self.policy.window_s} s reached for this API key; retry in {self.reset_s} s",
            headers={"Retry-After": str(self.reset_s)},
        )

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        """The `RateLimit-Policy` and `RateLimit` headers, as ASGI writes them."""
        name, policy = self.policy.name, self.policy
        return [
            (b"ratelimit-policy", f'"{name}";q={policy.quota};w={policy.window_s}'.encode()),
            (b"ratelimit", f'"{name}";r={self.remaining};t={self.reset_s}'.encode()),
        ]


class LeaseNeeded:
    """`check_from_memory`'s answer when only a lease (a database call) can decide."""


LEASE_NEEDED = LeaseNeeded()


class RateLimiter:
    """Fixed windows per (key, policy name): leased from `shared` when it is set, else in this
    process; thread-safe. `check` may make a database call (call it from the thread pool);
    `check_from_memory` never does."""

    def __init__(
        self,
        policies: Mapping[str, Policy],
        key_quotas: Mapping[str, int] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        prune_above: int = 100_000,
    ) -> None:
        self.policies = dict(policies)
        self.key_quotas = dict(key_quotas or {})
        self.clock = clock
        self.prune_above = prune_above
        self._windows: dict[tuple[str, str], list[float]] = {}  # -> [start_s, count]
        self._lock = threading.Lock()
        self.shared: LeasedWindows | None = None
        self._on_shared_error: Callable[[], None] = lambda: None
        self._shared_failing = False
        self._shared_retry_at = 0.0  # after a failed lease, count here until then
        self.shared_retry_s = 0.0

    def share(
        self, windows: SharedRateWindows, on_error: Callable[[], None], *, retry_s: float = 0.0
    ) -> None:
        """Lease from `windows` from now on; `on_error` is called for each failed lease, after
        which this process counts on its own for `retry_s` before it tries a lease again."""
        self.shared, self._on_shared_error = LeasedWindows(windows), on_error
        self.shared_retry_s = retry_s

    def policy_for(self, key: str, name: str) -> Policy | None:
        """The policy `name`, with the key's own quota when one is configured; None: unlimited."""
        policy = self.policies.get(name)
        if policy is None:
            return None
        quota = self.key_quotas.get(key)
        return policy if quota is None else Policy(policy.name, quota, policy.window_s)

    def check(self, key: str, name: str) -> Decision | None:
        """Count one request of `key` under policy `name` unless its quota is spent."""
        decision = self.check_from_memory(key, name)
        if not isinstance(decision, LeaseNeeded):
            return decision
        policy = self.policy_for(key, name)
        assert policy is not None and self.shared is not None  # as check_from_memory found
        return self._lease(self.shared, key, policy) or self._check_here(key, policy)

    def check_from_memory(self, key: str, name: str) -> Decision | LeaseNeeded | None:
        """`check` when it needs no database call, else LEASE_NEEDED."""
        policy = self.policy_for(key, name)
        if policy is None:
            return None
        if self.shared is None or self.clock() < self._shared_retry_at:
            return self._check_here(key, policy)
        granted = self.shared.from_memory(key, name, policy.quota)
        if granted is None:
            return LEASE_NEEDED
        return Decision(policy, granted.allowed, granted.remaining, granted.reset_s)

    def _lease(self, shared: LeasedWindows, key: str, policy: Policy) -> Decision | None:
        """The decision after a lease from the shared windows; None (count in this process
        instead) when the database fails."""
        keep_s = 2 * max(p.window_s for p in self.policies.values())
        try:
            granted = shared.take(key, policy.name, policy.quota, policy.window_s, keep_s)
        except SQLAlchemyError as error:
            self._on_shared_error()
            # Every request waiting on a failing database would cost a thread hop and a round
            # trip each: count here for a while instead.
            self._shared_retry_at = self.clock() + self.shared_retry_s
            if not self._shared_failing:  # once per outage, not once per request
                logger.warning("shared rate limits unavailable, counting per process: %s", error)
            self._shared_failing = True
            return None
        if self._shared_failing:
            logger.info("shared rate limits available again")
            self._shared_failing = False
        return Decision(policy, granted.allowed, granted.remaining, granted.reset_s)

    def _check_here(self, key: str, policy: Policy) -> Decision:
        """Count in this process's windows (each starting at the key's first request)."""
        name = policy.name
        now = self.clock()
        with self._lock:
            window = self._windows.get((key, name))
            if window is None or now - window[0] >= policy.window_s:
                if len(self._windows) >= self.prune_above:
                    self._prune(now)
                window = self._windows[(key, name)] = [now, 0]
            allowed = window[1] < policy.quota
            if allowed:
                window[1] += 1
            count, started = int(window[1]), window[0]
        # The window's age first: started + window_s - now can round up past window_s.
        reset_s = max(1, math.ceil(policy.window_s - (now - started)))
        return Decision(policy, allowed, max(0, policy.quota - count), reset_s)

    def _prune(self, now: float) -> None:
        """Drop ended windows (amortised: runs when the table is full, which halves it or more)."""
        longest = max((p.window_s for p in self.policies.values()), default=0)
        ended = [k for k, (start, _) in self._windows.items() if now - start >= longest]
        for k in ended:
            del self._windows[k]
        if len(self._windows) >= self.prune_above:  # all live: grow rather than thrash
            self.prune_above *= 2


def build_rate_limiter(settings: Settings) -> RateLimiter:
    window_s = settings.rate_limit_window_s
    policies = {
        name: Policy(name, quota, window_s)
        for name, quota in settings.rate_limits.items()
        if quota > 0  # 0: unlimited
    }
    return RateLimiter(policies, settings.rate_limit_key_quotas)


def install_rate_limits(app: FastAPI, settings: Settings) -> None:
    """The app's limiter, read by the caller's admission (its headers are written by
    service/api/request_record.py)."""
    app.state.rate_limiter = build_rate_limiter(settings)


def share_rate_limits(
    app: FastAPI, settings: Settings, metrics: Metrics
) -> SharedRateWindows | None:
    """On PostgreSQL with `rate_limit_shared`, the app's limiter counts in the database from
    now on (the caller disposes of the counters' engine at shutdown); else None."""
    limiter: RateLimiter | None = getattr(app.state, "rate_limiter", None)
    backend = make_url(settings.database_url).get_backend_name()
    if limiter is None or not limiter.policies or backend != "postgresql":
        return None
    if not settings.rate_limit_shared:
        return None
    windows = SharedRateWindows(settings)
    limiter.share(
        windows,
        lambda: metrics.db_errors.labels(operation="rate_limit").inc(),
        retry_s=settings.db_reconnect_backoff_s,
    )
    return windows
