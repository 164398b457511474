"""SQLite: the hot path's quotes committed in the event loop thread itself.

The writer thread (service/db/quote_writer.py) keeps the event loop from waiting on the
database, but each hand-over costs two thread wake-ups, and the writer's Python code competes
with the loop for the GIL (docs/history/2026-11-performance.md has the measurements).

A SQLite commit in WAL mode with `synchronous=NORMAL` is a write to the page cache, tens of
microseconds, so the loop can afford it as long as it never waits: its connection has a busy
timeout of 0 and never sleeps on a lock. The loop holds that one connection and inserts on it
directly (service/db/sqlite_quote_inserts.py), without SQLAlchemy's per-statement Python; WAL
checkpoints are a background thread's (service/db/wal_checkpoints.py). A commit that finds the
write lock taken writes nothing. Another worker's commit holds the lock for a fraction of a
millisecond, so the group is tried again at the loop's next iteration (other requests are
served in between), together with what that iteration adds, for up to `lock_retry_s` after its
oldest request was queued. A lock held longer (a migration, a backup, an operator's `BEGIN
IMMEDIATE`), or any other failure (a disk error, a missing file), sends the group to the writer
thread, which waits for the lock and spools as before, and leaves commits to the writer for
`pause_s`, so a database in trouble costs the loop one attempt per pause, not one per
iteration.

PostgreSQL is committed to from the loop too, but asynchronously: a commit there is a network
round trip and a WAL flush on the server (service/db/postgres_in_loop.py).
"""

from __future__ import annotations

import enum
import logging
import sqlite3
import time
from collections.abc import Sequence

from sqlalchemy.exc import SQLAlchemyError

from service.db.quote_store import QuoteStore
from service.db.sqlite_quote_inserts import SqliteQuoteInserts
from service.db.tables import NewQuote

logger = logging.getLogger(__name__)


class InLoop(enum.Enum):
    """What became of a group's attempt in the loop."""

    COMMITTED = "committed"
    RETRY = "retry"  # the lock was taken: try again at the next iteration
    WRITER = "writer"  # nothing written: the writer thread is to store the group
    REFUSED = "refused"  # the database refused the attempt: the writer spools, not trying again


class InLoopCommits:
    """Commits of an event loop iteration's quotes through the database's in-loop engine, which
    never waits (service.db.engine.build_in_loop_engine)."""

    def __init__(
        self, store: QuoteStore, *, lock_retry_s: float = 0.005, pause_s: float = 1.0
    ) -> None:
        self.store = store
        self.lock_retry_s = lock_retry_s
        self.pause_s = pause_s
        self.transactions = 0  # committed in the loop, for tests and diagnostics
        self.lock_taken = 0  # attempts that found the write lock taken
        self._paused_until = 0.0  # time.monotonic() [s]
        self._held_inserts: SqliteQuoteInserts | None = None

    def commit(self, quotes: Sequence[NewQuote], oldest_queued_at: float) -> InLoop:
        """Try to commit `quotes` (stamped as QuoteStore.commit), the oldest of which was queued
        at `oldest_queued_at` (time.monotonic() [s])."""
        now = time.monotonic()
        inserts = self._inserts()
        if inserts is None or now < self._paused_until:
            return InLoop.WRITER
        try:
            self.store.commit_sqlite(quotes, inserts)
        except sqlite3.IntegrityError:
            return InLoop.WRITER  # one request's constraint: the writer stores the others alone
        except (sqlite3.Error, SQLAlchemyError) as error:  # SQLAlchemy's: while connecting
            if isinstance(error, sqlite3.Error) and error.sqlite_errorcode == sqlite3.SQLITE_BUSY:
                self.lock_taken += 1
                if now - oldest_queued_at < self.lock_retry_s:
                    return InLoop.RETRY
            self._paused_until = now + self.pause_s
            logger.info("quotes left to the writer thread for %.1f s: %s", self.pause_s, error)
            return InLoop.WRITER
        self.transactions += 1
        return InLoop.COMMITTED

    def close(self) -> None:
        """Give the held connection back (at shutdown)."""
        if self._held_inserts is not None:
            self._held_inserts.close()
            self._held_inserts = None

    def _inserts(self) -> SqliteQuoteInserts | None:
        """The inserts on the database's current in-loop engine (None: there is none). A new
        engine (the database swapped under it, as tests do) gets a new connection."""
        engine = self.store.database.in_loop_engine
        held = self._held_inserts
        if held is not None and held.engine is not engine:
            held.close(invalidate=True)
            held = self._held_inserts = None
        if engine is None:
            return None
        if held is None:
            held = self._held_inserts = SqliteQuoteInserts(engine)
        return held
