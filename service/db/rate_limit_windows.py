"""Rate-limit counters in PostgreSQL, shared by every replica: one atomic upsert per lease.

A lease of `n` requests of key `k` under a policy of `w` seconds is added to the row (k, policy,
start), where `start` is the current time floored to a multiple of `w`, read from the
database's clock so that replicas whose clocks differ still count into the same window. The
upsert returns the count with the lease included, the window's start and the seconds left in
it; the caller compares the count with its quota (service/api/rate_limit_leases.py). Rows of
windows long over are deleted from time to time by whichever replica is due.

The counters have their own small engine in autocommit mode, without pre-ping: one round trip
per lease (a pooled session would add a ping, a BEGIN and a COMMIT), and a statement timeout
of its own, short, since the request taking a lease waits for it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sqlalchemy import Engine, create_engine, make_url, text

from service.config import Settings
from service.db.engine import ReconnectBackoff, postgres_connect_args

COUNT_STATEMENT = text(
    """
    INSERT INTO rate_limit_windows AS w (key_id, policy, window_start_s, count)
    VALUES (:key_id, :policy,
            floor(extract(epoch FROM clock_timestamp()) / :window_s)::bigint * :window_s, :n)
    ON CONFLICT (key_id, policy, window_start_s) DO UPDATE SET count = w.count + :n
    RETURNING w.count, w.window_start_s,
              w.window_start_s + :window_s - extract(epoch FROM clock_timestamp())
    """
)
PRUNE_STATEMENT = text(
    "DELETE FROM rate_limit_windows "
    "WHERE window_start_s < extract(epoch FROM clock_timestamp()) - :keep_s"
)
STATEMENT_TIMEOUT_MS = 1000  # at most; the request taking a lease waits on this statement
POOL_SIZE, POOL_OVERFLOW = 2, 6  # one statement of ~0.3 ms each: few connections serve many


@dataclass(frozen=True, slots=True)
class WindowCount:
    """Requests counted in the current window, the lease just taken included; the window's
    start [Unix s] and the seconds until it ends."""

    count: int
    window_start_s: int
    left_s: float


class SharedRateWindows:
    """The rate-limit counters of `settings.database_url` (PostgreSQL), with their own engine.

    Thread-safe (the engine's pool); every method does I/O and raises SQLAlchemyError when the
    database fails, which the limiter answers by failing open.
    """

    def __init__(self, settings: Settings, *, prune_every_s: float = 60.0) -> None:
        url = make_url(settings.database_url)
        connect_args = postgres_connect_args(settings)
        timeout_ms = min(settings.db_statement_timeout_ms, STATEMENT_TIMEOUT_MS)
        connect_args["options"] = f"-c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms}"
        self.engine: Engine = create_engine(
            url,
            connect_args=connect_args,
            isolation_level="AUTOCOMMIT",
            pool_size=POOL_SIZE,
            max_overflow=POOL_OVERFLOW,
            pool_timeout=settings.db_pool_timeout_s,
        )
        ReconnectBackoff(settings.db_reconnect_backoff_s).install(self.engine)
        self.prune_every_s = prune_every_s
        self._next_prune = time.monotonic() + prune_every_s
        self._lock = threading.Lock()

    def count(
        self, key_id: str, policy: str, window_s: int, *, n: int = 1, keep_s: int
    ) -> WindowCount:
        """Count `n` requests of `key_id` under `policy` in the current `window_s`-second
        window; when due, also delete windows that started more than `keep_s` seconds ago."""
        parameters = {"key_id": key_id, "policy": policy, "window_s": window_s, "n": n}
        with self.engine.connect() as connection:
            row = connection.execute(COUNT_STATEMENT, parameters).one()
            if self._prune_due():
                connection.execute(PRUNE_STATEMENT, {"keep_s": keep_s})
        return WindowCount(int(row[0]), int(row[1]), float(row[2]))

    def prune(self, keep_s: int) -> int:
        """Delete windows that started more than `keep_s` seconds ago; how many were."""
        with self.engine.connect() as connection:
            return connection.execute(PRUNE_STATEMENT, {"keep_s": keep_s}).rowcount

    def _prune_due(self) -> bool:
        now = time.monotonic()
        with self._lock:
            if now < self._next_prune:
                return False
            self._next_prune = now + self.prune_every_s
            return True

    def dispose(self) -> None:
        self.engine.dispose()
