"""The group-committing quote sink, on its thread: requests that wait while a commit is under
way are stored together by the next one, each answered only once its own quotes are committed;
a failure reaches every request of its group, a constraint broken by one request only that one."""

from __future__ import annotations

import asyncio
import dataclasses
import queue
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from db_support import quote
from sqlalchemy import create_engine, func, select

from service.db.engine import Database
from service.db.quote_store import QuoteStore
from service.db.spool import QuoteSpool
from service.db.store_outcomes import DuplicateIdempotencyKey, Saved, StoreFailed
from service.db.tables import Quote, QuoteRow
from service.quotes.postgres_sink import PostgresQuoteSink
from service.quotes.quote_sink import QuoteSink
from service.quotes.sqlite_sink import SqliteQuoteSink


def thread_sink(store: QuoteStore) -> QuoteSink:
    """The backend's sink committing on its thread alone (the group commit under test)."""
    if store.database.backend == "sqlite":
        return SqliteQuoteSink(store, commit_in_loop=False)
    return PostgresQuoteSink(store, commit_in_loop=False)


def unstamped(key: str | None = None) -> Quote:
    """A quote whose `created_at` the store stamps."""
    return quote(key=key, created_at=None)


def stored_ids(database: Database) -> set[str]:
    with database.sessions() as session:
        return set(session.scalars(select(Quote.id)))


class GatedStore(QuoteStore):
    """A real store whose first save waits for `gate`: the other requests queue meanwhile."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.group_sizes: list[int] = []

    def save(self, quotes: Sequence[Quote]) -> Saved:
        self.group_sizes.append(len(quotes))
        if len(self.group_sizes) == 1:
            self.entered.set()
            assert self.gate.wait(10)
        return super().save(quotes)


def test_requests_waiting_on_a_commit_are_stored_together_by_the_next(
    database: Database,
) -> None:
    store = GatedStore(database)
    writer = thread_sink(store)
    writer.start()
    first, waiting = (
        [unstamped()],
        [
            [unstamped(), unstamped()],
            [unstamped()],
            [unstamped()],
        ],
    )

    async def scenario() -> list[Saved]:
        head = asyncio.create_task(writer.save(first))
        assert await asyncio.to_thread(store.entered.wait, 10)
        rest = [asyncio.create_task(writer.save(q)) for q in waiting]
        await asyncio.sleep(0.05)  # all three are queued behind the held commit
        assert not any(task.done() for task in [head, *rest])
        store.gate.set()
        return list(await asyncio.gather(head, *rest))

    assert asyncio.run(scenario()) == [Saved.STORED] * 4
    writer.stop()
    assert store.group_sizes == [1, 4]  # two transactions for five quotes of four requests
    assert writer.transactions == 2
    all_quotes = first + [q for group in waiting for q in group]
    assert stored_ids(database) == {q.id for q in all_quotes}
    assert all(q.created_at is not None for q in all_quotes)


def test_one_loop_iterations_requests_are_handed_over_and_answered_together(
    database: Database,
) -> None:
    """Requests started in one event loop iteration reach the writer thread in one hand-over
    (one wake-up, not one per request), and their group's results come back to the loop in
    one call; a request of a later iteration is handed over on its own."""
    store = GatedStore(database)
    store.gate.set()
    writer = thread_sink(store)
    puts: list[int] = []

    class CountingQueue(queue.SimpleQueue[Any]):
        def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
            puts.append(len(item) if isinstance(item, list) else -1)
            super().put(item, block, timeout)

    writer._queue = CountingQueue()
    writer.start()
    wake_ups: list[int] = []

    async def scenario() -> list[Saved]:
        loop = asyncio.get_running_loop()
        real_call = loop.call_soon_threadsafe

        def counting_call(callback: Any, *args: Any) -> Any:
            wake_ups.append(len(args[0]))
            return real_call(callback, *args)

        loop.call_soon_threadsafe = counting_call  # type: ignore[method-assign]
        together = await asyncio.gather(*(writer.save([unstamped()]) for _ in range(5)))
        alone = await writer.save([unstamped()])
        return [*together, alone]

    assert asyncio.run(scenario()) == [Saved.STORED] * 6
    writer.stop()
    assert puts[:2] == [5, 1]  # then the stop marker
    assert store.group_sizes == [5, 1] and wake_ups == [5, 1]


def test_a_failed_commit_reaches_every_request_of_its_group(database: Database) -> None:
    database.engine.dispose()  # the database goes away: a file that cannot be opened
    database.engine = create_engine("sqlite:////proc/no-such-dir/quotes.sqlite3")
    database.sessions.configure(bind=database.engine)
    writer = thread_sink(QuoteStore(database))  # no spool: StoreFailed
    writer.start()

    async def scenario() -> list[BaseException | Saved]:
        saves = [writer.save([unstamped()]) for _ in range(3)]
        return list(await asyncio.gather(*saves, return_exceptions=True))

    outcomes = asyncio.run(scenario())
    writer.stop()
    assert [type(outcome) for outcome in outcomes] == [StoreFailed] * 3


def test_a_duplicate_key_fails_only_its_own_request(database: Database) -> None:
    store = GatedStore(database)
    writer = thread_sink(store)
    writer.start()
    QuoteStore(database).save([unstamped("k1")])  # the key is taken already

    async def scenario() -> list[BaseException | Saved]:
        head = asyncio.create_task(writer.save([unstamped()]))
        assert await asyncio.to_thread(store.entered.wait, 10)
        clash = asyncio.create_task(writer.save([unstamped("k1")]))
        fine = asyncio.create_task(writer.save([unstamped("k2")]))
        await asyncio.sleep(0.05)
        store.gate.set()
        return list(await asyncio.gather(head, clash, fine, return_exceptions=True))

    head, clash, fine = asyncio.run(scenario())
    writer.stop()
    assert head is Saved.STORED and fine is Saved.STORED
    assert isinstance(clash, DuplicateIdempotencyKey)
    # the group of two failed as a whole, then each was tried alone
    assert store.group_sizes == [1, 2, 1, 1]
    with database.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Quote)) == 3


def test_stop_stores_what_is_queued_first(database: Database) -> None:
    store = GatedStore(database)
    writer = thread_sink(store)
    writer.start()
    queued = [unstamped() for _ in range(3)]

    async def scenario() -> list[Saved]:
        tasks = [asyncio.create_task(writer.save([q])) for q in queued]
        assert await asyncio.to_thread(store.entered.wait, 10)
        stopping = threading.Thread(target=writer.stop)
        stopping.start()  # queued behind the requests: they are stored before it ends
        store.gate.set()
        results = list(await asyncio.gather(*tasks))
        await asyncio.to_thread(stopping.join, 10)
        return results

    assert asyncio.run(scenario()) == [Saved.STORED] * 3
    assert stored_ids(database) == {q.id for q in queued}
    assert datetime.now(UTC) >= max(q.created_at for q in queued)


def answered() -> Quote:
    """A quote stamped when priced, as the quote service hands it over."""
    return quote()


def test_requests_that_waited_through_a_failed_attempt_are_spooled_without_another(
    database: Database, tmp_path: Path
) -> None:
    """The database refuses (here: cannot be opened); the first request's attempt is held
    while three more queue. They are spooled at once, not made to wait for an attempt of their
    own; the next request after them tries the database again."""
    database.engine.dispose()
    database.engine = create_engine("sqlite:////proc/no-such-dir/quotes.sqlite3")
    database.sessions.configure(bind=database.engine)
    store = GatedStore(database)
    store.spool = QuoteSpool(tmp_path / "spool")
    writer = thread_sink(store)
    writer.start()

    async def scenario() -> tuple[list[Saved], Saved]:
        head = asyncio.create_task(writer.save([answered()]))
        assert await asyncio.to_thread(store.entered.wait, 10)
        rest = [asyncio.create_task(writer.save([answered()])) for _ in range(3)]
        await asyncio.sleep(0.05)
        store.gate.set()
        queued = list(await asyncio.gather(head, *rest))
        return queued, await writer.save([answered()])

    queued, later = asyncio.run(scenario())
    writer.stop()
    assert queued == [Saved.SPOOLED] * 4 and later is Saved.SPOOLED
    assert store.group_sizes == [1, 1]  # database attempts: the first and the later request
    assert len(store.spool.pending()) == 3  # the first, the three queued together, the later


def test_a_quote_row_has_exactly_the_quotes_columns() -> None:
    """QuoteRow (what the hot path inserts) must not drift from the table it is inserted into:
    a field per column, in order, but the factor set id, which its document decides."""
    columns = [column.key for column in Quote.__table__.columns]
    derived = ["carbon_factor_set_id"]
    assert [field.name for field in dataclasses.fields(QuoteRow)] + derived == columns
    assert isinstance(QuoteRow.carbon_factor_set_id, property)
