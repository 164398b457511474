"""Group commit for the estimate hot path: one thread stores the quotes of every request that is
waiting at that moment, in one transaction.

A quote id may only be answered once its row is committed, so each request waits for a commit.
Committing each request alone costs a transaction (BEGIN, INSERT, COMMIT and their round trips)
per quote; under load, requests that arrive while a commit is under way are queued and committed
together by the next one, so the cost per quote falls as the rate rises, and no request waits
for a timer. Durability is unchanged: a request is answered only after its own quotes are
committed (or spooled), never before.

Hand-overs between the event loop and the writer thread cost a wake-up each (a futex to wake the
writer, a write to the loop's self-pipe to wake the loop), so they are made per group rather
than per request: the requests an event loop iteration adds are queued together at its end,
and a group's results reach each loop in one call. With SQLite, an iteration's group is first
committed in the loop thread itself, with no hand-over at all (service/db/in_loop_commit.py);
with PostgreSQL, it is sent from the loop on an asyncio connection, the groups that arrive
while a commit is under way being committed together by the next (service/db/
postgres_in_loop.py). The thread takes only what those cannot commit.

While the database refuses quotes (locked, unreachable), each attempt can take a whole lock or
connect timeout. Requests that queued during a failed attempt are not made to wait for one more:
their group is spooled (or answered without a quote id) at once, and the next group tries the
database again. So a request waits for at most one database attempt, as when it stored alone.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from service.db.in_loop_commit import InLoop, InLoopCommits
from service.db.postgres_in_loop import PostgresInLoopCommits
from service.db.quote_store import QuoteStore
from service.db.store_outcomes import DuplicateIdempotencyKey, Saved, StoreFailed
from service.db.tables import NewQuote

logger = logging.getLogger(__name__)

Outcome = Saved | BaseException


@dataclass(frozen=True, slots=True)
class _Pending:
    """One request's quotes and the future its coroutine awaits on its event loop."""

    quotes: Sequence[NewQuote]
    future: asyncio.Future[Saved]
    loop: asyncio.AbstractEventLoop
    queued_at: float  # time.monotonic() [s]
    refused: bool = False  # the database refused it once already: spool, do not try again


_STOP = object()


class QuoteWriter:
    """Stores quotes for coroutines, many requests' quotes per transaction (see module doc).

    `max_quotes` bounds one transaction (give or take the requests of one event loop iteration,
    which are handed over together); requests beyond it wait for the next one. `in_loop`
    commits SQLite groups in the loop, `postgres_in_loop` PostgreSQL groups from it.
    """

    def __init__(
        self,
        store: QuoteStore,
        *,
        max_quotes: int = 1000,
        in_loop: InLoopCommits | None = None,
        postgres_in_loop: PostgresInLoopCommits | None = None,
    ) -> None:
        self.store = store
        self.max_quotes = max_quotes
        self.in_loop = in_loop
        self.postgres_in_loop = postgres_in_loop
        # PostgreSQL from the loop: per event loop with a commit under way, the requests whose
        # groups arrived meanwhile (committed together when it ends), and the commit tasks.
        self._behind_commit: dict[asyncio.AbstractEventLoop, list[_Pending]] = {}
        self._commit_tasks: set[asyncio.Task[None]] = set()
        self._queue: queue.SimpleQueue[list[_Pending] | object] = queue.SimpleQueue()
        # Per event loop, the requests queued in its current iteration (see _hand_over).
        self._outboxes: dict[asyncio.AbstractEventLoop, list[_Pending]] = {}
        self._thread = threading.Thread(target=self._run, name="quote-writer", daemon=True)
        self.transactions = 0  # committed or spooled groups, for tests and diagnostics
        self._failed_at = -1.0  # time.monotonic() when the last failed attempt ended [s]

    @property
    def groups(self) -> int:
        """Groups stored so far: committed in the loop, or committed or spooled by the thread."""
        in_loop = self.in_loop.transactions if self.in_loop else 0
        from_loop = self.postgres_in_loop.transactions if self.postgres_in_loop else 0
        return self.transactions + in_loop + from_loop

    def start(self) -> None:
        self._thread.start()

    async def finish_in_loop(self, timeout_s: float = 30.0) -> None:
        """Wait for the commits under way from this loop (at shutdown, after requests
        drained: a request whose client left does not wait for its own)."""
        tasks = [
            task for task in self._commit_tasks if task.get_loop() is asyncio.get_running_loop()
        ]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Store what is queued, then end the thread (at shutdown, after requests drained and
        `finish_in_loop`)."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout_s)
        if self.in_loop is not None:
            self.in_loop.close()
        if self.postgres_in_loop is not None:
            self.postgres_in_loop.close()

    async def save(self, quotes: Sequence[NewQuote], *, commit_now: bool = False) -> Saved:
        """Commit (or spool) `quotes` together with other waiting requests' quotes, stamping
        their `created_at`; raises StoreFailed or DuplicateIdempotencyKey as QuoteStore.save.

        `commit_now`: the caller is the only request in progress, so there is no one to group
        with; with SQLite, its quotes are committed at once in the loop if they can be (a
        group's commit waits for the iteration's other requests to be priced)."""
        if not self._thread.is_alive():
            raise RuntimeError("the quote writer is not running")
        loop = asyncio.get_running_loop()
        queued_at = time.monotonic()
        if (
            commit_now
            and self.in_loop is not None
            and loop not in self._outboxes  # else it is retried with a group in front of it
            and self.in_loop.commit(quotes, queued_at) is InLoop.COMMITTED
        ):
            return Saved.STORED  # no future to wait on, no hand-over to schedule
        future: asyncio.Future[Saved] = loop.create_future()
        self._add_to_outbox(loop, [_Pending(quotes, future, loop, queued_at)])
        # Shielded: a client that goes away does not un-store its quote, nor lose the result.
        return await asyncio.shield(future)

    def _add_to_outbox(self, loop: asyncio.AbstractEventLoop, requests: list[_Pending]) -> None:
        """Add `requests` to what `loop` hands over at its next iteration (a group tried again
        comes first: the outbox is empty when it is added)."""
        outbox = self._outboxes.get(loop)
        if outbox is None:
            self._outboxes[loop] = requests
            loop.call_soon(self._hand_over, loop)
        else:
            outbox += requests

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """Commit every request `loop`'s last iteration added: here in the loop if it can
        (SQLite, service/db/in_loop_commit.py); if another connection's commit holds the lock,
        again at the next iteration, with what that adds; with PostgreSQL, from the loop
        (service/db/postgres_in_loop.py); else queued for the writer thread (one wake-up)."""
        group = self._outboxes.pop(loop)
        if self.in_loop is not None:
            outcome = self.in_loop.commit([q for p in group for q in p.quotes], group[0].queued_at)
            if outcome is InLoop.COMMITTED:
                _settle_all([(pending.future, Saved.STORED) for pending in group])
                return
            if outcome is InLoop.RETRY:
                self._add_to_outbox(loop, group)
                return
        if self.postgres_in_loop is not None:
            waiting = self._behind_commit.get(loop)
            if waiting is not None:
                waiting += group  # committed when the commit under way ends
                return
            if self.postgres_in_loop.takes([q for p in group for q in p.quotes]):
                self._behind_commit[loop] = []
                task = loop.create_task(self._commit_from_loop(self.postgres_in_loop, group))
                self._commit_tasks.add(task)
                task.add_done_callback(self._commit_tasks.discard)
                return
        self._queue.put(group)

    async def _commit_from_loop(
        self, commits: PostgresInLoopCommits, group: list[_Pending]
    ) -> None:
        """Commit `group`, then, one commit at a time, the requests that queued behind it on
        this loop; what the loop cannot commit goes to the writer thread."""
        loop = asyncio.get_running_loop()
        try:
            while group:
                quotes = [quote for pending in group for quote in pending.quotes]
                try:
                    outcome = await commits.commit(quotes)
                except BaseException:
                    # Cancelled mid-statement (at shutdown) or a bug: committed or not, so
                    # spooled (a replay skips ids stored already), with those behind it.
                    behind = self._behind_commit.pop(loop, [])
                    self._queue.put([replace(p, refused=True) for p in group] + behind)
                    raise
                if outcome is InLoop.COMMITTED:
                    _settle_all([(pending.future, Saved.STORED) for pending in group])
                elif outcome is InLoop.REFUSED:
                    # Those queued behind it waited through the failed attempt too: spooled
                    # with it, without another (see module doc).
                    behind = self._behind_commit.pop(loop, [])
                    self._queue.put([replace(p, refused=True) for p in group + behind])
                    return
                else:
                    self._queue.put(group)
                group = self._next_behind(loop, commits)
        finally:
            self._behind_commit.pop(loop, None)

    def _next_behind(
        self, loop: asyncio.AbstractEventLoop, commits: PostgresInLoopCommits
    ) -> list[_Pending]:
        """The next group to commit from `loop`: its requests queued behind the last commit,
        up to `max_quotes` (the rest stay queued behind this one); empty when none are, or
        when the loop is not to commit them (they go to the thread)."""
        waiting = self._behind_commit.get(loop, [])
        count = cut = 0
        while cut < len(waiting) and count < self.max_quotes:
            count += len(waiting[cut].quotes)
            cut += 1
        group, self._behind_commit[loop] = waiting[:cut], waiting[cut:]
        if group and not commits.takes([q for p in group for q in p.quotes]):
            self._queue.put(group + self._behind_commit[loop])
            return []
        return group

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            assert isinstance(first, list)
            group, stop = list(first), False
            count = sum(len(pending.quotes) for pending in first)
            while count < self.max_quotes:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stop = True
                    break
                assert isinstance(more, list)
                group += more
                count += sum(len(pending.quotes) for pending in more)
            self._commit(group)
            if stop:
                return

    def _commit(self, group: list[_Pending]) -> None:
        failed_at = self._failed_at
        waited = [p for p in group if p.refused or p.queued_at < failed_at]
        fresh = [p for p in group if not p.refused and p.queued_at >= failed_at]
        settled: list[tuple[_Pending, Outcome]] = []
        for part, attempt in ((waited, False), (fresh, True)):
            # `waited` sat through a failed attempt: no second one for them (see module doc)
            if part:
                outcomes = self._save_group(part, attempt=attempt)
                settled += zip(part, outcomes, strict=True)
        self.transactions += 1
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Saved], Outcome]]] = {}
        for pending, outcome in settled:
            by_loop.setdefault(pending.loop, []).append((pending.future, outcome))
        for loop, results in by_loop.items():
            loop.call_soon_threadsafe(_settle_all, results)

    def _save_group(self, group: list[_Pending], *, attempt: bool) -> list[Outcome]:
        """One transaction for the group (or, without `attempt`, the spool); if one request's
        quote breaks a constraint, each request is stored alone so that the others are not
        refused with it."""
        quotes = [quote for pending in group for quote in pending.quotes]
        try:
            if not attempt:
                saved: Outcome = self.store.spool_instead(quotes, "the database refused quotes")
            else:
                saved = self.store.save(quotes)
                if saved is Saved.SPOOLED:
                    self._failed_at = time.monotonic()
        except DuplicateIdempotencyKey as error:
            if len(group) == 1:
                return [error]
            return [self._save_alone(pending) for pending in group]
        except StoreFailed as error:
            if attempt:
                self._failed_at = time.monotonic()
            saved = error
        except Exception as error:  # a bug: every waiting request answers it, none hangs
            logger.exception("quote writer failed on %d quote(s)", len(quotes))
            saved = error
        return [saved] * len(group)

    def _save_alone(self, pending: _Pending) -> Outcome:
        try:
            return self.store.save(pending.quotes)
        except (DuplicateIdempotencyKey, StoreFailed) as error:
            return error


def _settle_all(results: list[tuple[asyncio.Future[Saved], Outcome]]) -> None:
    for future, outcome in results:
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
