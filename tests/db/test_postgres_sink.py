"""PostgreSQL: the quote writer commits the hot path's groups from the event loop
(service/quotes/postgres_sink.py): one statement per group, the requests that arrive while a
commit is under way committed together next; a refused attempt is spooled without another, a
duplicate key fails only its own request."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from db_support import empty, quote
from sqlalchemy import create_engine, select, text

from service.config import Settings
from service.db.engine import Database
from service.db.quote_store import Claim, QuoteStore
from service.db.spool import QuoteSpool
from service.db.store_outcomes import DuplicateIdempotencyKey, Saved
from service.db.tables import IdempotencyClaim, NewQuote, Quote
from service.quotes.postgres_sink import PostgresQuoteSink

UNREACHABLE = "postgresql+psycopg://quotes:quotes@127.0.0.1:1/quotes"


class CountingStore(QuoteStore):
    """A real store counting the sink's thread's database attempts and spoolings."""

    attempts = 0
    spoolings = 0

    def save(self, quotes: Sequence[NewQuote]) -> Saved:
        self.attempts += 1
        return super().save(quotes)

    def spool_instead(self, quotes: Sequence[NewQuote], reason: str) -> Saved:
        self.spoolings += 1
        return super().spool_instead(quotes, reason)


@pytest.fixture
def database(postgres_url: str) -> Iterator[Database]:
    empty(create_engine(postgres_url))
    database = Database(Settings(database_url=postgres_url))
    yield database
    database.dispose()


def unstamped(key: str | None = None) -> Quote:
    return quote(key=key, created_at=None)


def stored_ids(database: Database) -> set[str]:
    with database.sessions() as session:
        return set(session.scalars(select(Quote.id)))


def writer_for(store: QuoteStore) -> tuple[PostgresQuoteSink, PostgresQuoteSink]:
    commits = writer = PostgresQuoteSink(store)
    writer.start()
    return writer, commits


@pytest.mark.postgres
def test_one_iterations_requests_are_one_statement_from_the_loop(database: Database) -> None:
    store = CountingStore(database)
    writer, commits = writer_for(store)
    quotes = [unstamped() for _ in range(5)]

    async def scenario() -> list[Saved]:
        return list(await asyncio.gather(*(writer.save([q]) for q in quotes)))

    assert asyncio.run(scenario()) == [Saved.STORED] * 5
    writer.stop()
    assert commits.loop_transactions == 1 and writer.transactions == 0 and store.attempts == 0
    assert stored_ids(database) == {q.id for q in quotes}
    assert all(q.created_at is not None for q in quotes)


@pytest.mark.postgres
def test_requests_arriving_during_a_commit_are_committed_together_by_the_next(
    database: Database, postgres_url: str
) -> None:
    """An operator's lock holds the first commit for 0.2 s; three requests of three later
    loop iterations queue behind it and are committed by one statement after it."""
    store = CountingStore(database)
    writer, commits = writer_for(store)
    blocker = create_engine(postgres_url).connect()
    blocker.execute(text("LOCK TABLE quotes IN EXCLUSIVE MODE"))
    first, behind = unstamped(), [unstamped() for _ in range(3)]

    async def scenario() -> list[Saved]:
        head = asyncio.create_task(writer.save([first]))
        rest = []
        for later in behind:
            await asyncio.sleep(0.02)  # a loop iteration of its own
            rest.append(asyncio.create_task(writer.save([later])))
        await asyncio.sleep(0.1)
        assert not any(task.done() for task in [head, *rest])  # held by the lock
        blocker.commit()
        return list(await asyncio.gather(head, *rest))

    assert asyncio.run(scenario()) == [Saved.STORED] * 4
    writer.stop()
    blocker.close()
    assert commits.loop_transactions == 2 and writer.transactions == 0
    assert stored_ids(database) == {q.id for q in [first, *behind]}


def test_a_refused_attempt_is_spooled_without_another_and_the_next_goes_to_the_thread(
    tmp_path: Path,
) -> None:
    """The server is unreachable: the loop's attempt fails, its request is spooled by the
    thread without a second attempt; during the pause that follows, the next request goes to
    the thread, which makes its own attempt (through the engine) before spooling."""
    database = Database(Settings(database_url=UNREACHABLE, db_connect_timeout_s=1))
    store = CountingStore(database, QuoteSpool(tmp_path / "spool"))
    writer, commits = writer_for(store)

    async def scenario() -> list[Saved]:  # quotes stamped when priced, as the service does
        first = await writer.save([quote()])
        return [first, await writer.save([quote()])]

    assert asyncio.run(scenario()) == [Saved.SPOOLED] * 2
    writer.stop()
    database.dispose()
    assert commits.loop_transactions == 0
    # two spooled, one attempt in the thread: the second request's (its save spools it); the
    # first's spooling followed only the loop's attempt
    assert store.attempts == 1 and store.spoolings == 2
    assert store.spool is not None and len(store.spool.pending()) == 2


def test_requests_queued_behind_a_refused_attempt_are_spooled_with_it(tmp_path: Path) -> None:
    """A server that accepts connections and never answers (hung): the loop's connection
    attempt takes its whole timeout (psycopg's minimum, 2 s) while two more requests queue
    behind it; all three are spooled together, none tried again by the thread."""
    hung = socket.create_server(("127.0.0.1", 0))  # listens, never accepts nor answers
    port = hung.getsockname()[1]
    url = f"postgresql+psycopg://quotes:quotes@127.0.0.1:{port}/quotes"
    database = Database(Settings(database_url=url, db_connect_timeout_s=1))
    store = CountingStore(database, QuoteSpool(tmp_path / "spool"))
    writer, commits = writer_for(store)

    async def scenario() -> list[Saved]:
        first = asyncio.create_task(writer.save([quote()]))
        rest = []
        for _ in range(2):
            await asyncio.sleep(0.05)
            rest.append(asyncio.create_task(writer.save([quote()])))
        return list(await asyncio.gather(first, *rest))

    assert asyncio.run(scenario()) == [Saved.SPOOLED] * 3
    writer.stop()
    database.dispose()
    hung.close()
    assert commits.loop_transactions == 0 and store.attempts == 0
    assert store.spoolings == 1  # one spool file for the three, written by the thread
    assert store.spool is not None and len(store.spool.pending()) == 1


@pytest.mark.postgres
def test_a_duplicate_key_fails_only_its_own_request(database: Database) -> None:
    store = CountingStore(database)
    taken = unstamped("k1")
    QuoteStore(database).save([taken])
    writer, commits = writer_for(store)
    plain, clash, fine = unstamped(), unstamped("k1"), unstamped("k2")

    async def scenario() -> list[BaseException | Saved]:
        saves = [writer.save([plain]), writer.save([clash]), writer.save([fine])]
        return list(await asyncio.gather(*saves, return_exceptions=True))

    outcomes = asyncio.run(scenario())
    writer.stop()
    assert outcomes[0] is Saved.STORED and outcomes[2] is Saved.STORED
    assert isinstance(outcomes[1], DuplicateIdempotencyKey)
    # the loop's statement wrote nothing; the thread tried the group, then each alone
    assert commits.loop_transactions == 0 and store.attempts == 4
    assert stored_ids(database) == {taken.id, plain.id, fine.id}


@pytest.mark.postgres
def test_shutdown_waits_for_a_commit_whose_client_left(
    database: Database, postgres_url: str
) -> None:
    """A request cancelled while its commit is under way (its client left): the commit goes
    on, and `finish_in_loop` at shutdown waits for it."""
    store = CountingStore(database)
    writer, commits = writer_for(store)
    blocker = create_engine(postgres_url).connect()
    blocker.execute(text("LOCK TABLE quotes IN EXCLUSIVE MODE"))
    left = unstamped()

    async def scenario() -> None:
        request = asyncio.create_task(writer.save([left]))
        await asyncio.sleep(0.05)
        request.cancel()
        asyncio.get_running_loop().call_later(0.1, blocker.commit)
        await writer.finish_in_loop()

    asyncio.run(scenario())
    writer.stop()
    blocker.close()
    assert commits.loop_transactions == 1
    assert stored_ids(database) == {left.id}


def claims_of(database: Database) -> list[tuple[str, str, str]]:
    with database.engine.connect() as connection:
        rows = connection.execute(
            select(
                IdempotencyClaim.tenant, IdempotencyClaim.idempotency_key, IdempotencyClaim.holder
            )
        )
        return sorted((row[0], row[1], row[2]) for row in rows)


@pytest.mark.postgres
def test_a_new_key_is_claimed_from_the_loop_and_any_other_left_to_a_thread(
    database: Database, tmp_path: Path
) -> None:
    """A new key is claimed by the loop's one statement; a key with a stored quote, a key in
    the spool and a key claimed already are not (None, nothing written)."""
    spool = QuoteSpool(tmp_path / "spool")
    store = QuoteStore(database, spool)
    store.commit([quote(key="stored")])
    spool.append([quote(key="spooled")])
    writer = PostgresQuoteSink(store)

    async def scenario() -> list[Claim | None]:
        try:
            return [
                await writer.claim_in_loop("acme", key)
                for key in ("new", "stored", "spooled", "new")
            ]
        finally:
            writer._inserts().close()  # this loop ends with the call

    new, stored, spooled, again = asyncio.run(scenario())
    assert new == Claim("acme", "new", store.holder)
    assert stored is None and spooled is None and again is None
    assert claims_of(database) == [("acme", "new", store.holder)]
    assert writer.loop_claims == 1


def test_a_failed_claim_pauses_claims_from_the_loop() -> None:
    """The server is unreachable: the loop's claim fails (None: a thread tries), and the next
    one is not attempted from the loop during the pause."""
    database = Database(Settings(database_url=UNREACHABLE, db_connect_timeout_s=1))
    writer = PostgresQuoteSink(QuoteStore(database), pause_s=60)

    async def scenario() -> tuple[Claim | None, Claim | None, float]:
        first = await writer.claim_in_loop("acme", "k1")
        started = time.monotonic()
        second = await writer.claim_in_loop("acme", "k2")
        return first, second, time.monotonic() - started

    first, second, waited_s = asyncio.run(scenario())
    database.dispose()
    assert first is None and second is None
    assert waited_s < 0.1  # no second connection attempt (its timeout is 1 s)
    assert writer.loop_claims == 0
