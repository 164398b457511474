"""SQLite: an event loop iteration's quotes are committed in the loop thread itself
(service/quotes/sqlite_sink.py); what it cannot commit at once goes to the sink's thread, which
waits for the lock or spools as before."""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from db_support import quote
from sqlalchemy import Engine, create_engine, select

from service.config import Settings
from service.db import migrate
from service.db.engine import Database, build_in_loop_engine
from service.db.quote_store import Claim, QuoteStore
from service.db.sqlite_quote_inserts import SqliteQuoteInserts
from service.db.store_outcomes import DuplicateIdempotencyKey, Saved
from service.db.tables import IdempotencyClaim, NewQuote, Quote
from service.quotes.sqlite_sink import SqliteQuoteSink

THREAD_BUSY_TIMEOUT_MS = 3000
PAUSE_S = 0.3


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'quotes.sqlite3'}"
    migrate.upgrade(url)
    return url


@pytest.fixture
def writer(sqlite_url: str) -> Iterator[SqliteQuoteSink]:
    settings = Settings(
        database_url=sqlite_url,
        sqlite_busy_timeout_ms=THREAD_BUSY_TIMEOUT_MS,
    )
    database = Database(settings)
    assert database.in_loop_engine is not None
    store = QuoteStore(database)
    writer = SqliteQuoteSink(store, pause_s=PAUSE_S)
    writer._queue = CountingQueue()
    writer.start()
    yield writer
    writer.stop()
    database.dispose()


def unstamped(key: str | None = None) -> Quote:
    return quote(key=key, created_at=None)


def stored_ids(writer: SqliteQuoteSink) -> set[str]:
    with writer.store.database.sessions() as session:
        return set(session.scalars(select(Quote.id)))


class CountingQueue(queue.SimpleQueue[Any]):
    """The sink's thread's queue, recording the size of every group queued for the thread."""

    def __init__(self) -> None:
        self.group_sizes: list[int] = []

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if isinstance(item, list):
            self.group_sizes.append(len(item))
        super().put(item, block, timeout)


def thread_hand_overs(writer: SqliteQuoteSink) -> list[int]:
    assert isinstance(writer._queue, CountingQueue)
    return writer._queue.group_sizes


def write_lock_held(writer: SqliteQuoteSink, sqlite_url: str) -> sqlite3.Connection:
    """Another connection holding the database's write lock (`BEGIN IMMEDIATE`) until its
    `rollback()`; the file is put in WAL mode first, as the service has it."""
    assert writer.store.database.is_reachable()
    locker = sqlite3.connect(
        sqlite_url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False
    )
    locker.execute("BEGIN IMMEDIATE")
    return locker


def test_one_iterations_requests_are_committed_in_the_loop_together(
    writer: SqliteQuoteSink,
) -> None:
    hand_overs = thread_hand_overs(writer)
    quotes = [[unstamped()], [unstamped(), unstamped()], [unstamped()]]

    async def scenario() -> list[Saved]:
        return list(await asyncio.gather(*(writer.save(q) for q in quotes)))

    assert asyncio.run(scenario()) == [Saved.STORED] * 3
    assert writer.loop_transactions == 1
    assert writer.transactions == 0 and hand_overs == []  # the thread never woke
    flat = [q for group in quotes for q in group]
    assert stored_ids(writer) == {q.id for q in flat}
    assert all(q.created_at is not None for q in flat)


def test_a_request_whose_client_went_away_is_stored_with_its_group(
    writer: SqliteQuoteSink,
) -> None:
    """A request cancelled while its group waits for the commit (its client left) cancels only
    its own wait: its quote is committed with the group, and the others are answered."""
    leaving, staying = [unstamped()], [unstamped()]

    async def scenario() -> Saved:
        gone = asyncio.ensure_future(writer.save(leaving))
        kept = asyncio.ensure_future(writer.save(staying))
        await asyncio.sleep(0)  # both are queued in this iteration's group, not yet committed
        assert writer.loop_transactions == 0
        gone.cancel()
        saved = await kept
        with pytest.raises(asyncio.CancelledError):
            await gone
        return saved

    assert asyncio.run(scenario()) is Saved.STORED
    assert writer.loop_transactions == 1
    assert stored_ids(writer) == {leaving[0].id, staying[0].id}


def test_a_stopped_sink_stores_nothing(writer: SqliteQuoteSink) -> None:
    writer.stop()
    with pytest.raises(RuntimeError, match="not running"):
        asyncio.run(writer.save([unstamped()]))
    assert stored_ids(writer) == set()


def test_a_lock_held_briefly_is_waited_for_in_the_loop_without_blocking_it(
    writer: SqliteQuoteSink, sqlite_url: str
) -> None:
    """Another worker's commit holds the lock for a moment: the group is tried again at the
    loop's next iterations (the loop serves other work meanwhile), joined by what they add,
    and committed in the loop once the lock is free; the thread is not involved."""
    writer.lock_retry_s = 1.0
    hand_overs = thread_hand_overs(writer)
    locker = write_lock_held(writer, sqlite_url)

    async def scenario() -> list[Saved]:
        first = asyncio.create_task(writer.save([unstamped()]))
        ticks = 0
        while writer.lock_taken < 3:
            await asyncio.sleep(0)  # the loop is not blocked: this coroutine keeps running
            ticks += 1
        second = asyncio.create_task(writer.save([unstamped()]))  # joins the retried group
        await asyncio.sleep(0)
        assert ticks >= 3 and not first.done()
        locker.rollback()
        return list(await asyncio.gather(first, second))

    try:
        assert asyncio.run(scenario()) == [Saved.STORED] * 2
    finally:
        locker.close()
    assert hand_overs == [] and writer.transactions == 0
    assert writer.loop_transactions == 1  # both requests, one transaction
    assert len(stored_ids(writer)) == 2


def test_a_lock_held_longer_sends_the_quotes_to_the_thread_and_pauses_the_loop(
    writer: SqliteQuoteSink, sqlite_url: str
) -> None:
    """A lock held beyond `lock_retry_s` (an operator's BEGIN IMMEDIATE): the group goes to the
    thread, which waits for the lock with its own busy timeout and stores it; the loop leaves
    the next request to the thread without trying; after the pause it commits again."""
    writer.lock_retry_s = 0.05
    hand_overs = thread_hand_overs(writer)
    locker = write_lock_held(writer, sqlite_url)

    async def scenario() -> list[Saved]:
        first = asyncio.create_task(writer.save([unstamped()]))
        while not hand_overs:
            await asyncio.sleep(0.01)
        during_pause = asyncio.create_task(writer.save([unstamped()]))
        await asyncio.sleep(0.1)
        assert not first.done() and not during_pause.done()  # the thread waits for the lock
        locker.rollback()
        stored = list(await asyncio.gather(first, during_pause))
        await asyncio.sleep(PAUSE_S)
        return [*stored, await writer.save([unstamped()])]

    try:
        assert asyncio.run(scenario()) == [Saved.STORED] * 3
    finally:
        locker.close()
    lock_taken = writer.lock_taken
    assert lock_taken >= 2  # tried at iterations for 0.05 s, then not during the pause
    assert hand_overs == [1, 1]
    assert writer.transactions in (1, 2)  # the thread may take both groups in one
    assert writer.loop_transactions == 1
    assert len(stored_ids(writer)) == 3


def test_a_request_alone_is_committed_at_once(writer: SqliteQuoteSink) -> None:
    """`commit_now` (no other request in progress): committed in the save call itself, with no
    hand-over to a later iteration."""

    async def scenario() -> tuple[Saved, int]:
        loop = asyncio.get_running_loop()
        scheduled: list[object] = []
        real_call_soon = loop.call_soon

        def counting_call_soon(callback: Any, *args: Any, **kwargs: Any) -> Any:
            scheduled.append(callback)
            return real_call_soon(callback, *args, **kwargs)

        loop.call_soon = counting_call_soon  # type: ignore[method-assign]
        saved = await writer.save([unstamped()], commit_now=True)
        return saved, len([c for c in scheduled if getattr(c, "__name__", "") == "_hand_over"])

    assert asyncio.run(scenario()) == (Saved.STORED, 0)
    assert writer.loop_transactions == 1 and writer.transactions == 0


class CountingStore(QuoteStore):
    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self.engines: list[Engine] = []

    def commit_sqlite(
        self, quotes: Sequence[NewQuote], inserts: SqliteQuoteInserts, *, stamp: bool = True
    ) -> None:
        self.engines.append(inserts.engine)  # the loop's engine, or the thread's
        super().commit_sqlite(quotes, inserts, stamp=stamp)


def test_a_failing_database_pauses_commits_in_the_loop(sqlite_url: str) -> None:
    """The loop's engine cannot open its file (a disk error, say): the quotes go to the thread
    (whose engine can) and, for `pause_s`, the loop does not try again."""
    database = Database(Settings(database_url=sqlite_url))
    store = CountingStore(database)
    assert database.in_loop_engine is not None
    database.in_loop_engine.dispose()
    broken = database.in_loop_engine = create_engine("sqlite:////proc/no-such-dir/quotes.sqlite3")
    writer = in_loop = SqliteQuoteSink(store, pause_s=PAUSE_S)
    writer.start()

    async def scenario() -> list[Saved]:
        failed = await writer.save([unstamped()])
        paused = await writer.save([unstamped()])
        await asyncio.sleep(PAUSE_S)
        return [failed, paused, await writer.save([unstamped()])]

    try:
        assert asyncio.run(scenario()) == [Saved.STORED] * 3
    finally:
        writer.stop()
        database.dispose()
    tried = database.engine
    assert store.engines == [broken, tried, tried, broken, tried]
    assert in_loop.lock_taken == 0 and writer.transactions == 3


def test_a_duplicate_key_goes_to_the_thread_which_fails_only_its_request(
    writer: SqliteQuoteSink,
) -> None:
    """The loop's transaction for the whole group breaks a constraint and writes nothing; the
    thread stores the group's requests alone, so only the clashing one fails; a constraint
    says nothing about the database's health, so the loop does not pause."""
    writer.store.save([unstamped("taken")])

    async def scenario() -> list[BaseException | Saved]:
        group = [writer.save([unstamped()]), writer.save([unstamped("taken")])]
        together = list(await asyncio.gather(*group, return_exceptions=True))
        return [*together, await writer.save([unstamped()])]

    fine, clash, later = asyncio.run(scenario())
    assert fine is Saved.STORED and later is Saved.STORED
    assert isinstance(clash, DuplicateIdempotencyKey)
    assert writer.loop_transactions == 1  # `later`, committed in the loop
    assert len(stored_ids(writer)) == 3


def test_only_sqlite_commits_in_the_loop(sqlite_url: str) -> None:
    assert build_in_loop_engine(Settings(database_url=sqlite_url)) is not None
    assert (
        build_in_loop_engine(Settings(database_url=sqlite_url, sqlite_commit_in_loop=False)) is None
    )
    postgres = "postgresql+psycopg://quotes:quotes@127.0.0.1:1/quotes"  # never connected to
    assert build_in_loop_engine(Settings(database_url=postgres)) is None


def test_the_loops_connection_never_waits_for_a_lock(sqlite_url: str) -> None:
    engine = build_in_loop_engine(Settings(database_url=sqlite_url, sqlite_busy_timeout_ms=2000))
    assert engine is not None
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 0
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def claim_rows(writer: SqliteQuoteSink) -> list[tuple[str, str, str]]:
    with writer.store.database.engine.connect() as connection:
        rows = connection.execute(
            select(
                IdempotencyClaim.tenant, IdempotencyClaim.idempotency_key, IdempotencyClaim.holder
            )
        )
        return sorted((row[0], row[1], row[2]) for row in rows)


def test_a_new_key_is_claimed_in_the_loop(writer: SqliteQuoteSink) -> None:
    claim = asyncio.run(writer.claim_in_loop("acme", "new-key"))
    assert claim == Claim("acme", "new-key", writer.store.holder)
    assert claim_rows(writer) == [("acme", "new-key", writer.store.holder)]
    assert writer.loop_claims == 1


def test_a_key_that_is_not_new_is_left_to_a_thread(
    writer: SqliteQuoteSink, sqlite_url: str
) -> None:
    """A key with a stored quote, a key claimed already and a taken write lock: no claim in
    the loop (None, nothing written), and no wait for the lock (the thread's busy timeout is
    3 s)."""
    writer.store.commit([quote(key="stored")])
    assert asyncio.run(writer.claim_in_loop("acme", "stored")) is None
    assert asyncio.run(writer.claim_in_loop("acme", "claimed")) is not None
    assert asyncio.run(writer.claim_in_loop("acme", "claimed")) is None  # the claim stays this one
    locker = write_lock_held(writer, sqlite_url)
    try:
        started = time.monotonic()
        assert asyncio.run(writer.claim_in_loop("acme", "locked-out")) is None
        assert time.monotonic() - started < THREAD_BUSY_TIMEOUT_MS / 1000 / 3
    finally:
        locker.rollback()
        locker.close()
    assert claim_rows(writer) == [("acme", "claimed", writer.store.holder)]
    assert writer.loop_claims == 1


def test_no_claim_in_the_loop_while_its_commits_are_paused_or_off(sqlite_url: str) -> None:
    database = Database(Settings(database_url=sqlite_url))
    store = QuoteStore(database)
    try:
        paused = SqliteQuoteSink(store)
        paused._paused_until = time.monotonic() + 60
        assert asyncio.run(paused.claim_in_loop("acme", "k")) is None
        assert (
            asyncio.run(SqliteQuoteSink(store, commit_in_loop=False).claim_in_loop("acme", "k"))
            is None
        )
        assert asyncio.run(SqliteQuoteSink(store).claim_in_loop("acme", "k")) is not None
    finally:
        database.dispose()
