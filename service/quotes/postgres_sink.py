"""PostgreSQL: the estimate path's quotes committed from the event loop, asynchronously.

A PostgreSQL commit cannot be made in the loop as SQLite's is (service/quotes/sqlite_sink.py):
it is a network round trip and a WAL flush on the server, and an unreachable server would stall
the loop for a connect timeout. So the loop sends it on an asyncio connection
(service/db/postgres_quote_inserts.py: one multi-row INSERT, one round trip) and serves other
requests until it is answered: a group's requests wait for their commit, the loop does not.

One commit per loop is under way at a time; requests whose groups arrive meanwhile are committed
together by the next one. A failed attempt (unreachable, timed out, refused) hands the group to
the sink's thread to be spooled without another attempt (a request waits for at most one
database attempt), and leaves the next groups to the thread for `pause_s`, which attempts them
through the engine and its reconnect backoff: a database in trouble costs the loop one attempt
per pause. A constraint (a duplicate idempotency key) hands the group to the thread, which
stores each request alone so that the others are not refused with it.

A new idempotency key is claimed from the loop the same way, by one statement on the same
connection (`claim_in_loop`); a key that is not new, or a failure, leaves the lookup and the
claim to a thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

import psycopg

from service.db.base import utc_now
from service.db.postgres_quote_inserts import PostgresQuoteInserts
from service.db.quote_store import QuoteStore
from service.db.store_outcomes import Saved
from service.db.tables import NewQuote
from service.quotes.handoff import settle_all
from service.quotes.quote_sink import InLoop, Pending, QuoteSink, quotes_of

logger = logging.getLogger(__name__)


class PostgresQuoteSink(QuoteSink):
    """Quotes committed from the event loop on PostgreSQL (see the module doc); without
    `commit_in_loop`, by the sink's thread alone."""

    def __init__(
        self,
        store: QuoteStore,
        *,
        commit_in_loop: bool = True,
        pause_s: float = 1.0,
        max_quotes: int = 1000,
    ) -> None:
        super().__init__(store, max_quotes=max_quotes)
        self.commit_in_loop = commit_in_loop
        self.pause_s = pause_s
        self._paused_until = 0.0  # time.monotonic() [s]
        self._held_inserts: PostgresQuoteInserts | None = None
        # Per event loop with a commit under way, the requests whose groups arrived meanwhile
        # (committed together when it ends), and the commit tasks.
        self._behind_commit: dict[asyncio.AbstractEventLoop, list[Pending]] = {}
        self._commit_tasks: set[asyncio.Task[None]] = set()

    async def finish_in_loop(self, timeout_s: float = 30.0) -> None:
        """Wait for the commits under way from this loop (a request whose client left does
        not wait for its own)."""
        loop = asyncio.get_running_loop()
        tasks = [task for task in self._commit_tasks if task.get_loop() is loop]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        super().stop(timeout_s)
        if self._held_inserts is not None:  # close the held connection
            self._held_inserts.close()
            self._held_inserts = None

    def _claims_in_loop(self) -> bool:
        """Not during a pause after a failed commit or claim."""
        return self.commit_in_loop and time.monotonic() >= self._paused_until

    async def _claim_new_key(self, tenant: str, key: str, holder: str) -> bool:
        """On the loop's connection (the loop serves other requests meanwhile), as the quotes
        are committed: handing it to a thread instead costs two thread switches, and the
        request then reaches the pricing thread alone rather than in the pass of the requests
        beside it."""
        try:
            return await self._inserts().claim_new_key(tenant, key, holder, utc_now())
        except (psycopg.Error, OSError, TimeoutError) as error:
            # As after a failed commit: a database in trouble costs one attempt per pause.
            self._paused_until = time.monotonic() + self.pause_s
            logger.warning(
                "could not claim an idempotency key from the loop, left to a thread for %.1f s: %s",
                self.pause_s,
                error or type(error).__name__,
            )
            return False

    def _commit_group(self, loop: asyncio.AbstractEventLoop, group: list[Pending]) -> None:
        waiting = self._behind_commit.get(loop)
        if waiting is not None:
            waiting += group  # committed when the commit under way ends
            return
        if not self._takes(quotes_of(group)):
            self._to_thread(group)
            return
        self._behind_commit[loop] = []
        task = loop.create_task(self._commit_from_loop(group))
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_tasks.discard)

    async def _commit_from_loop(self, group: list[Pending]) -> None:
        """Commit `group`, then, one commit at a time, the requests that queued behind it on
        this loop; what the loop cannot commit goes to the thread."""
        loop = asyncio.get_running_loop()
        try:
            while group:
                try:
                    outcome = await self._commit_once(quotes_of(group))
                except BaseException:
                    # Cancelled mid-statement (at shutdown) or a bug: committed or not, so
                    # spooled (a replay skips ids stored already), with those behind it.
                    behind = self._behind_commit.pop(loop, [])
                    self._to_thread([replace(p, refused=True) for p in group] + behind)
                    raise
                if outcome is InLoop.COMMITTED:
                    settle_all([(pending.future, Saved.STORED) for pending in group])
                elif outcome is InLoop.REFUSED:
                    # Those queued behind it waited through the failed attempt too: spooled
                    # with it, without another (see module doc).
                    behind = self._behind_commit.pop(loop, [])
                    self._to_thread([replace(p, refused=True) for p in group + behind])
                    return
                else:
                    self._to_thread(group)
                group = self._next_behind(loop)
        finally:
            self._behind_commit.pop(loop, None)

    def _next_behind(self, loop: asyncio.AbstractEventLoop) -> list[Pending]:
        """The next group to commit from `loop`: its requests queued behind the last commit,
        up to `max_quotes` (the rest stay queued behind this one); empty when none are, or
        when the loop is not to commit them (they go to the thread)."""
        waiting = self._behind_commit.get(loop, [])
        count = cut = 0
        while cut < len(waiting) and count < self.max_quotes:
            count += len(waiting[cut].quotes)
            cut += 1
        group, self._behind_commit[loop] = waiting[:cut], waiting[cut:]
        if group and not self._takes(quotes_of(group)):
            self._to_thread(group + self._behind_commit[loop])
            return []
        return group

    def _takes(self, quotes: Sequence[NewQuote]) -> bool:
        """Whether the loop is to commit `quotes` (else the thread): commits in the loop on,
        not during a pause after a failure, and not more than one statement can carry."""
        return (
            self.commit_in_loop
            and time.monotonic() >= self._paused_until
            and self._inserts().fits(quotes)
        )

    async def _commit_once(self, quotes: Sequence[NewQuote]) -> InLoop:
        """Commit `quotes` (stamped as the store stamps them): COMMITTED, THREAD (a
        constraint, nothing written) or REFUSED (the database failed the attempt)."""
        try:
            await self.store.commit_postgres(quotes, self._inserts())
        except psycopg.IntegrityError:
            return InLoop.THREAD
        except (psycopg.Error, OSError, TimeoutError) as error:
            self._paused_until = time.monotonic() + self.pause_s
            logger.warning(
                "could not store %d quote(s) from the loop, left to the sink's thread for "
                "%.1f s: %s",
                len(quotes),
                self.pause_s,
                error or type(error).__name__,
            )
            return InLoop.REFUSED
        self.loop_transactions += 1
        return InLoop.COMMITTED

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
