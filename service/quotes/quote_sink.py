"""Group commit of the estimate path's quotes: one sink per database backend
(service/quotes/sqlite_sink.py, service/quotes/postgres_sink.py) on this common ground.

A quote id may only be answered once its row is committed (or spooled), so each request waits
for a commit. Committing each request alone costs a transaction per quote; instead, the
requests an event loop iteration adds are grouped and committed together at its end, in or from
the loop as the backend allows (the subclass's `_commit_group`), and what the loop cannot commit
goes to the sink's thread. The thread commits through the quote store (which waits for locks and
connects) and spools what the database refuses. Durability is unchanged: a request is answered
only after its own quotes are committed or spooled, never before.

While the database refuses quotes (locked, unreachable), each attempt can take a whole lock or
connect timeout. Requests that queued during a failed attempt are not made to wait for one more:
their group is spooled (or answered without a quote id) at once, and the next group tries the
database again. So a request waits for at most one database attempt, as when it stored alone.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from service.db.quote_store import Claim, QuoteStore
from service.db.store_outcomes import DuplicateIdempotencyKey, Saved, StoreFailed
from service.db.tables import NewQuote
from service.quotes.handoff import STOP, settle_all, work_through

logger = logging.getLogger(__name__)

Outcome = Saved | BaseException


class InLoop(enum.Enum):
    """What became of a group's attempt in (or from) the event loop."""

    COMMITTED = "committed"
    RETRY = "retry"  # the lock was taken: try again at the next iteration
    THREAD = "thread"  # nothing written: the sink's thread is to store the group
    REFUSED = "refused"  # the database refused the attempt: the thread spools, not trying again


@dataclass(slots=True)
class Pending:
    """One request's quotes and the future its coroutine awaits on its event loop (not
    frozen: one is made per request, and a frozen dataclass sets each field through
    `object.__setattr__`, several times slower; none is changed once made)."""

    quotes: Sequence[NewQuote]
    future: asyncio.Future[Saved]
    loop: asyncio.AbstractEventLoop
    queued_at: float  # time.monotonic() [s]
    refused: bool = False  # the database refused it once already: spool, do not try again


def quotes_of(group: Sequence[Pending]) -> list[NewQuote]:
    return [quote for pending in group for quote in pending.quotes]


def _quote_count(group: Sequence[Pending]) -> int:
    return sum(len(pending.quotes) for pending in group)


class QuoteSink:
    """Stores quotes for coroutines, many requests' quotes per transaction (see module doc).

    This base commits every group on its thread; a backend's sink commits in or from the loop
    first. `max_quotes` bounds one thread transaction (give or take the requests of one event
    loop iteration, which are handed over together); requests beyond it wait for the next."""

    def __init__(self, store: QuoteStore, *, max_quotes: int = 1000) -> None:
        self.store = store
        self.max_quotes = max_quotes
        self.transactions = 0  # groups committed or spooled by the thread, for diagnostics
        self.loop_transactions = 0  # groups committed in or from the loop
        self.loop_claims = 0  # idempotency keys claimed in the loop
        self._queue: queue.SimpleQueue[list[Pending] | object] = queue.SimpleQueue()
        # Per event loop, the requests queued in its current iteration (see _hand_over).
        self._outboxes: dict[asyncio.AbstractEventLoop, list[Pending]] = {}
        self._thread = threading.Thread(target=self._run, name="quote-sink", daemon=True)
        # Whether the thread runs: what `Thread.is_alive()` answers, read on every request
        # without its lock and its two calls.
        self._running = False
        self._failed_at = -1.0  # time.monotonic() when the last failed attempt ended [s]

    @property
    def groups(self) -> int:
        """Groups stored so far: committed in or from the loop, or committed or spooled by the
        thread."""
        return self.transactions + self.loop_transactions

    def start(self) -> None:
        self._running = True  # before the thread can end (and clear it)
        self._thread.start()

    async def finish_in_loop(self, timeout_s: float = 30.0) -> None:
        """Wait for the commits under way from this loop (at shutdown, after requests
        drained); none in this base."""

    def stop(self, timeout_s: float = 30.0) -> None:
        """Store what is queued, then end the thread (at shutdown, after requests drained and
        `finish_in_loop`)."""
        if self._thread.is_alive():
            self._queue.put(STOP)
            self._thread.join(timeout_s)

    async def save(self, quotes: Sequence[NewQuote], *, commit_now: bool = False) -> Saved:
        """Commit (or spool) `quotes` together with other waiting requests' quotes, stamping
        their `created_at`; raises StoreFailed or DuplicateIdempotencyKey.

        `commit_now`: the caller is the only request in progress, so there is no one to group
        with: its quotes are committed at once in the loop where the backend can."""
        if not self._running:
            raise RuntimeError("the quote sink is not running")
        loop = asyncio.get_running_loop()
        queued_at = time.monotonic()
        if commit_now and loop not in self._outboxes and self._commit_alone(quotes, queued_at):
            return Saved.STORED  # no future to wait on, no hand-over to schedule
        future: asyncio.Future[Saved] = loop.create_future()
        self._add_to_outbox(loop, [Pending(quotes, future, loop, queued_at)])
        # Not shielded: a client that goes away cancels only this future. Its quotes stay in
        # the group, which is committed (or spooled) all the same, and `settle_all` passes over
        # a cancelled future; a shield would cost a second future and its callbacks per request.
        return await future

    async def claim_in_loop(self, tenant: str, key: str) -> Claim | None:
        """Claim a new idempotency key in or from the loop where the backend can: no quote
        stored or spooled under it, not claimed, and the claim committed. None when any of that
        does not hold or the attempt failed: the key is then looked up and claimed on a thread
        (QuoteStore.by_idempotency_key and claim), which settles each case."""
        if not self._claims_in_loop():
            return None
        store = self.store
        try:
            if store.in_spool(tenant, key):
                return None
        except OSError:
            return None
        if not await self._claim_new_key(tenant, key, store.holder):
            return None
        self.loop_claims += 1
        return Claim(tenant, key, store.holder)

    def _claims_in_loop(self) -> bool:
        """Whether the backend claims new keys in or from the loop now; never in this base."""
        return False

    async def _claim_new_key(self, tenant: str, key: str, holder: str) -> bool:
        """The backend's one statement claiming `key` for `holder` (see claim_in_loop);
        whether it claimed it, False after a failure too."""
        raise NotImplementedError

    def _commit_alone(self, quotes: Sequence[NewQuote], queued_at: float) -> bool:
        """Commit one request's quotes at once in the loop if the backend can; whether it
        did (else they are grouped as usual)."""
        return False

    def _commit_group(self, loop: asyncio.AbstractEventLoop, group: list[Pending]) -> None:
        """Commit the group `loop`'s last iteration added; this base hands it to the thread."""
        self._to_thread(group)

    def _to_thread(self, group: list[Pending]) -> None:
        self._queue.put(group)

    def _add_to_outbox(self, loop: asyncio.AbstractEventLoop, requests: list[Pending]) -> None:
        """Add `requests` to what `loop` hands over at its next iteration (a group tried again
        comes first: the outbox is empty when it is added)."""
        outbox = self._outboxes.get(loop)
        if outbox is None:
            self._outboxes[loop] = requests
            loop.call_soon(self._hand_over, loop)
        else:
            outbox += requests

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        self._commit_group(loop, self._outboxes.pop(loop))

    def _run(self) -> None:
        try:
            work_through(
                self._queue,
                _quote_count,
                self.max_quotes,
                lambda groups: self._commit_by_thread([p for group in groups for p in group]),
            )
        finally:
            self._running = False

    def _commit_by_thread(self, group: list[Pending]) -> None:
        failed_at = self._failed_at
        waited = [p for p in group if p.refused or p.queued_at < failed_at]
        fresh = [p for p in group if not p.refused and p.queued_at >= failed_at]
        settled: list[tuple[Pending, Outcome]] = []
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
            loop.call_soon_threadsafe(settle_all, results)

    def _save_group(self, group: list[Pending], *, attempt: bool) -> list[Outcome]:
        """One transaction for the group (or, without `attempt`, the spool); if one request's
        quote breaks a constraint, each request is stored alone so that the others are not
        refused with it."""
        quotes = quotes_of(group)
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
            logger.exception("quote sink failed on %d quote(s)", len(quotes))
            saved = error
        return [saved] * len(group)

    def _save_alone(self, pending: Pending) -> Outcome:
        try:
            return self.store.save(pending.quotes)
        except (DuplicateIdempotencyKey, StoreFailed) as error:
            return error
