"""SQLite: the estimate path's quotes committed in the event loop thread itself.

Handing each group to a thread costs two thread wake-ups, and the thread's Python competes with
the loop for the GIL. A SQLite commit in WAL mode with `synchronous=NORMAL` is a write to the
page cache, tens of microseconds, so the loop can afford it as long as it never waits: its
connection (the database's in-loop engine) has a busy timeout of 0 and never sleeps on a lock,
and inserts through service/db/sqlite_quote_inserts.py; WAL checkpoints are a background
thread's (service/db/wal_checkpoints.py).

A commit that finds the write lock taken writes nothing. Another worker's commit holds the lock
for a fraction of a millisecond, so the group is tried again at the loop's next iteration (other
requests are served in between), together with what that iteration adds, for up to
`lock_retry_s` after its oldest request was queued. A lock held longer (a migration, a backup,
an operator's `BEGIN IMMEDIATE`), or any other failure (a disk error, a missing file), sends the
group to the sink's thread, which waits for the lock and spools (service/quotes/quote_sink.py),
and leaves commits to the thread for `pause_s`, so a database in trouble costs the loop one
attempt per pause, not one per iteration.

A new idempotency key is claimed in the loop the same way (`claim_in_loop`); a key that is not
new, a taken lock or an error leaves the lookup and the claim to a thread.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Sequence

from sqlalchemy.exc import SQLAlchemyError

from service.db.base import utc_now
from service.db.quote_store import QuoteStore
from service.db.sqlite_guard import is_lock_timeout
from service.db.sqlite_quote_inserts import SqliteQuoteInserts
from service.db.store_outcomes import Saved
from service.db.tables import NewQuote
from service.quotes.handoff import settle_all
from service.quotes.quote_sink import InLoop, Pending, QuoteSink, quotes_of

logger = logging.getLogger(__name__)


class SqliteQuoteSink(QuoteSink):
    """Quotes committed in the event loop on SQLite (see the module doc); without
    `commit_in_loop` (or without an in-loop engine), by the sink's thread alone."""

    def __init__(
        self,
        store: QuoteStore,
        *,
        commit_in_loop: bool = True,
        lock_retry_s: float = 0.005,
        pause_s: float = 1.0,
        max_quotes: int = 1000,
    ) -> None:
        super().__init__(store, max_quotes=max_quotes)
        self.commit_in_loop = commit_in_loop
        self.lock_retry_s = lock_retry_s
        self.pause_s = pause_s
        self.lock_taken = 0  # attempts that found the write lock taken
        self._paused_until = 0.0  # time.monotonic() [s]
        self._held_inserts: SqliteQuoteInserts | None = None

    def stop(self, timeout_s: float = 30.0) -> None:
        super().stop(timeout_s)
        if self._held_inserts is not None:  # give the held connection back
            self._held_inserts.close()
            self._held_inserts = None

    def _claims_in_loop(self) -> bool:
        return self._inserts() is not None and time.monotonic() >= self._paused_until

    async def _claim_new_key(self, tenant: str, key: str, holder: str) -> bool:
        """On the loop's connection, which never waits (a claim is a one-row commit, as a lone
        quote is): handing it to a thread instead costs two thread switches, and the request
        then reaches the pricing thread alone rather than in the pass of the requests beside
        it."""
        inserts = self._inserts()
        assert inserts is not None  # as _claims_in_loop found
        try:
            return inserts.claim_new_key(tenant, key, holder, utc_now())
        except (sqlite3.Error, SQLAlchemyError):  # SQLAlchemy's: while connecting
            return False

    def _commit_alone(self, quotes: Sequence[NewQuote], queued_at: float) -> bool:
        return self._commit_in_loop(quotes, queued_at) is InLoop.COMMITTED

    def _commit_group(self, loop: asyncio.AbstractEventLoop, group: list[Pending]) -> None:
        outcome = self._commit_in_loop(quotes_of(group), group[0].queued_at)
        if outcome is InLoop.COMMITTED:
            settle_all([(pending.future, Saved.STORED) for pending in group])
        elif outcome is InLoop.RETRY:
            self._add_to_outbox(loop, group)
        else:
            self._to_thread(group)

    def _commit_in_loop(self, quotes: Sequence[NewQuote], oldest_queued_at: float) -> InLoop:
        """Try to commit `quotes` (stamped as the store stamps them), the oldest of which was
        queued at `oldest_queued_at` (time.monotonic() [s])."""
        now = time.monotonic()
        inserts = self._inserts()
        if inserts is None or now < self._paused_until:
            return InLoop.THREAD
        try:
            self.store.commit_sqlite(quotes, inserts)
        except sqlite3.IntegrityError:
            return InLoop.THREAD  # one request's constraint: the thread stores the others alone
        except (sqlite3.Error, SQLAlchemyError) as error:  # SQLAlchemy's: while connecting
            if is_lock_timeout(error):
                self.lock_taken += 1
                if now - oldest_queued_at < self.lock_retry_s:
                    return InLoop.RETRY
            self._paused_until = now + self.pause_s
            logger.info("quotes left to the sink's thread for %.1f s: %s", self.pause_s, error)
            return InLoop.THREAD
        self.loop_transactions += 1
        return InLoop.COMMITTED

    def _inserts(self) -> SqliteQuoteInserts | None:
        """The inserts on the database's current in-loop engine (None: there is none, or
        commits in the loop are off). A new engine (the database swapped under it, as tests
        do) gets a new connection."""
        engine = self.store.database.in_loop_engine if self.commit_in_loop else None
        held = self._held_inserts
        if held is not None and held.engine is not engine:
            held.close(invalidate=True)
            held = self._held_inserts = None
        if engine is None:
            return None
        if held is None:
            guard = self.store.database.sqlite_guard  # checks; its lock waits are none
            held = self._held_inserts = SqliteQuoteInserts(engine, guard, notes_lock_timeouts=False)
        return held
