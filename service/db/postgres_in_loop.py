"""PostgreSQL: the hot path's quotes committed from the event loop, asynchronously.

As with SQLite (service/db/in_loop_commit.py), handing each group to the writer thread costs
two thread wake-ups and the thread's Python competes with the loop for the GIL. A PostgreSQL
commit cannot be made in the loop the same way: it is a network round trip and a WAL flush on
the server, and an unreachable server would stall the loop for a connect timeout. So the loop
sends it on an asyncio connection (service/db/postgres_quote_inserts.py) and serves other
requests until it is answered: a group's requests wait for their commit, the loop does not.

One commit per loop is under way at a time; requests whose groups arrive meanwhile are
committed together by the next one, as the writer thread groups them (QuoteWriter).

A failed attempt (unreachable, timed out, refused) hands the group to the writer thread to be
spooled without another attempt (a request waits for at most one database attempt), and leaves
the next groups to the writer thread for `pause_s`, which attempts them through the engine and
its reconnect backoff: a database in trouble costs the loop one attempt per pause. A constraint
(a duplicate idempotency key) hands the group to the writer thread, which stores each request
alone so that the others are not refused with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import psycopg

from service.db.in_loop_commit import InLoop
from service.db.postgres_quote_inserts import PostgresQuoteInserts
from service.db.quote_store import QuoteStore
from service.db.tables import NewQuote

logger = logging.getLogger(__name__)


class PostgresInLoopCommits:
    """Commits of the hot path's quote groups from the event loop on PostgreSQL (module doc)."""

    def __init__(self, store: QuoteStore, *, pause_s: float = 1.0) -> None:
        self.store = store
        self.pause_s = pause_s
        self.transactions = 0  # committed from the loop, for tests and diagnostics
        self._paused_until = 0.0  # time.monotonic() [s]
        self._held_inserts: PostgresQuoteInserts | None = None

    def takes(self, quotes: Sequence[NewQuote]) -> bool:
        """Whether the loop is to commit `quotes` (else the writer thread): not during a pause
        after a failure, and not more than one statement can carry."""
        return time.monotonic() >= self._paused_until and self._inserts().fits(quotes)

    async def commit(self, quotes: Sequence[NewQuote]) -> InLoop:
        """Commit `quotes` (stamped as QuoteStore.commit): COMMITTED, WRITER (a constraint,
        nothing written) or REFUSED (the database failed the attempt)."""
        try:
            await self.store.commit_postgres(quotes, self._inserts())
        except psycopg.IntegrityError:
            return InLoop.WRITER
        except (psycopg.Error, OSError, TimeoutError) as error:
            self._paused_until = time.monotonic() + self.pause_s
            logger.warning(
                "could not store %d quote(s) from the loop, left to the writer thread for "
                "%.1f s: %s",
                len(quotes),
                self.pause_s,
                error or type(error).__name__,
            )
            return InLoop.REFUSED
        self.transactions += 1
        return InLoop.COMMITTED

    def close(self) -> None:
        """Close the held connection (at shutdown)."""
        if self._held_inserts is not None:
            self._held_inserts.close()
            self._held_inserts = None

    def _inserts(self) -> PostgresQuoteInserts:
        """The inserts on the database's current engine: a new engine (the database swapped
        under it, as tests do) gets a new connection."""
        engine = self.store.database.engine
        held = self._held_inserts
        if held is None or held.engine is not engine:
            if held is not None:
                held.close()
            held = self._held_inserts = PostgresQuoteInserts(engine, self.store.database.settings)
        return held
