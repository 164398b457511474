"""This process's leases on the rate-limit windows shared in PostgreSQL.

One upsert per request costs each request a thread hop and a round trip: measured on the 2-core
CI machine with two workers, one key at 300 estimates/s offered, 72 answered/s against 280/s
with per-process counters (docs/operations.md, "Many replicas on one PostgreSQL"). So a process
takes requests from the shared window in leases: it adds `n` to the window's count at once and
admits up to `n` requests from memory before asking again. `n` is 1/16 of what the window had
left at the last count this process saw (1 near the quota, `quota // 16` in a fresh window), so
the count never passes the quota (only leased requests are admitted) and what other processes
hold unused when it runs out shrinks with it: a few requests of the quota may go unused, none
beyond it is admitted. Once a lease finds the window spent, the process refuses the key from
memory until the window ends.

Thread-safe: the decisions from memory take a lock; a lease is a database call (from the thread
pool), made outside it, one at a time per key and policy: the threads that find the lease spent
at once wait for the one taking the next and are served from it (otherwise each would take its
own sixteenth, and forty threads at a window's start would lease more than the whole quota).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from service.db.rate_limit_windows import SharedRateWindows

LEASE_FRACTION = 16  # a lease takes this fraction of what the window had left, at least 1


@dataclass(slots=True)
class Lease:
    """One key's requests leased from one shared window, and how that window stood."""

    window_start_s: int
    ends_at: float  # on this process's monotonic clock
    leased: int = 0
    used: int = 0
    counted: int = 0  # the window's count at the last lease, every process's leases included


@dataclass(frozen=True, slots=True)
class Granted:
    """A request's outcome under a policy of `quota`: admitted or not, `remaining` requests
    (unleased in the window plus this process's unused lease), `reset_s` until the window ends."""

    allowed: bool
    remaining: int
    reset_s: int


class LeasedWindows:
    """Admits requests from leases on `windows` (see module); `clock` is monotonic seconds."""

    def __init__(
        self,
        windows: SharedRateWindows,
        *,
        clock: Callable[[], float] = time.monotonic,
        prune_above: int = 100_000,
    ) -> None:
        self.windows = windows
        self.clock = clock
        self.prune_above = prune_above
        self._leases: dict[tuple[str, str], Lease] = {}
        self._taking: dict[tuple[str, str], threading.Lock] = {}  # one lease at a time per key
        self._lock = threading.Lock()

    def from_memory(self, key: str, policy: str, quota: int) -> Granted | None:
        """The outcome from this process's lease, or None when a lease must be taken first."""
        now = self.clock()
        with self._lock:
            lease = self._leases.get((key, policy))
            if lease is None or now >= lease.ends_at:
                return None
            if lease.used < lease.leased:
                lease.used += 1
                return self._granted(lease, quota, now, allowed=True)
            if lease.counted >= quota:  # the window is spent for every process
                return self._granted(lease, quota, now, allowed=False)
            return None

    def take(self, key: str, policy: str, quota: int, window_s: int, keep_s: int) -> Granted:
        """Lease requests from the shared window and admit this one if any were left (or from
        the lease another thread just took); raises SQLAlchemyError when the database fails
        (the caller fails open)."""
        with self._lock:
            taking = self._taking.setdefault((key, policy), threading.Lock())
        with taking:
            granted = self.from_memory(key, policy, quota)
            if granted is not None:
                return granted
            return self._take(key, policy, quota, window_s, keep_s)

    def _take(self, key: str, policy: str, quota: int, window_s: int, keep_s: int) -> Granted:
        now = self.clock()
        with self._lock:
            lease = self._leases.get((key, policy))
            known = lease.counted if lease is not None and now < lease.ends_at else 0
        n = max(1, (quota - known) // LEASE_FRACTION)
        counted = self.windows.count(key, policy, window_s, n=n, keep_s=keep_s)
        got = min(n, max(0, quota - (counted.count - n)))  # the part of the lease under quota
        now = self.clock()
        with self._lock:
            lease = self._leases.get((key, policy))
            if lease is None or lease.window_start_s != counted.window_start_s:
                if len(self._leases) >= self.prune_above:
                    self._prune(now)
                lease = Lease(counted.window_start_s, now + counted.left_s)
                self._leases[(key, policy)] = lease
            lease.leased += got
            lease.counted = max(lease.counted, counted.count)
            allowed = lease.used < lease.leased
            if allowed:
                lease.used += 1
            return self._granted(lease, quota, now, allowed=allowed)

    @staticmethod
    def _granted(lease: Lease, quota: int, now: float, *, allowed: bool) -> Granted:
        remaining = max(0, quota - lease.counted) + lease.leased - lease.used
        return Granted(allowed, remaining, max(1, math.ceil(lease.ends_at - now)))

    def _prune(self, now: float) -> None:
        """Drop leases of ended windows (when the table is full; grows if all are live)."""
        ended = [k for k, lease in self._leases.items() if now >= lease.ends_at]
        for k in ended:
            del self._leases[k]
            self._taking.pop(k, None)
        if len(self._leases) >= self.prune_above:
            self.prune_above *= 2
