"""PostgreSQL: the one-statement inserts (service/db/postgres_quote_inserts.py) write rows the ORM
reads back as the quotes written (from the loop and from a thread), all of a group or nothing,
and fail as the commits from the loop expect."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from db_support import (
    CLAIMS_AROUND_THE_KEYED_QUOTE,
    PLACEHOLDER,
    SET_A,
    SET_B,
    STAMP,
    add_claims,
    assert_read_back,
    claims_left,
    empty,
    mixed_group,
    quote_row,
    stamp_with,
)
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import IntegrityError

from service.config import Settings
from service.db.engine import build_engine
from service.db.postgres_quote_inserts import MAX_PARAMETERS, PostgresQuoteInserts


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    """The service's engine on an emptied database, with a 300 ms statement/lock timeout."""
    engine = build_engine(Settings(database_url=postgres_url, db_statement_timeout_ms=300))
    empty(create_engine(postgres_url))
    yield engine
    engine.dispose()


def table_rows(engine: Engine, table: str) -> list[tuple[Any, ...]]:
    with engine.connect() as connection:
        return [
            tuple(row) for row in connection.execute(text(f"SELECT * FROM {table} ORDER BY id"))
        ]


def inserts_for(engine: Engine) -> PostgresQuoteInserts:
    return PostgresQuoteInserts(
        engine, Settings(database_url=str(engine.url), db_statement_timeout_ms=300)
    )


def commit(inserts: PostgresQuoteInserts, quotes: list[Any], stored: set[str]) -> list[str]:
    async def run() -> list[str]:
        try:
            return await inserts.commit(quotes, stored, lambda: stamp_with(quotes))
        finally:
            inserts.close()  # this loop ends with the call

    return asyncio.run(run())


@pytest.mark.postgres
def test_the_rows_read_back_through_the_orm_are_the_quotes_written(engine: Engine) -> None:
    quotes = mixed_group()

    held_sets = commit(inserts_for(engine), quotes, set())

    assert held_sets == [SET_A.id, SET_B.id]
    assert_read_back(engine, quotes)
    stored = {row[0]: row for row in table_rows(engine, "quotes")}
    assert stored["q-1"][11] == STAMP  # timestamptz, read back as the aware stamp


@pytest.mark.postgres
def test_a_thread_commits_the_same_statement_through_the_engine(engine: Engine) -> None:
    quotes = mixed_group()

    held_sets = inserts_for(engine).commit_blocking(quotes, set(), lambda: stamp_with(quotes))

    assert held_sets == [SET_A.id, SET_B.id]
    assert_read_back(engine, quotes)


@pytest.mark.postgres
def test_sets_stored_already_are_skipped_or_left_as_they_are(engine: Engine) -> None:
    """A set the caller saw committed is not sent; one stored by another writer meanwhile (not
    in `stored_sets`) is a conflict ignored, not an error."""
    first = [quote_row("q-0", mixed_group()[0].response, PLACEHOLDER)]  # type: ignore[arg-type]
    assert commit(inserts_for(engine), first, set()) == [SET_A.id]

    assert commit(inserts_for(engine), mixed_group(), set()) == [SET_A.id, SET_B.id]
    assert [row[0] for row in table_rows(engine, "carbon_factor_sets")] == sorted(
        [SET_A.id, SET_B.id]
    )
    assert len(table_rows(engine, "quotes")) == 5


@pytest.mark.postgres
def test_a_constraint_writes_nothing_of_the_group_and_keeps_the_connection(
    engine: Engine,
) -> None:
    inserts = inserts_for(engine)

    async def run() -> tuple[bool, list[str]]:
        first = mixed_group()
        await inserts.commit(first[2:3], set(), lambda: stamp_with(first))  # "retry-1" stored
        connection = inserts._held
        clashing = mixed_group()
        clashing[2].id = "q-3-again"  # same idempotency key, new id
        with pytest.raises(psycopg.IntegrityError):
            await inserts.commit(clashing, set(), lambda: stamp_with(clashing))
        kept = inserts._held is connection
        fine = mixed_group()[:2]
        sets = await inserts.commit(fine, set(), lambda: stamp_with(fine))
        inserts.close()
        return kept, sets

    kept, sets = asyncio.run(run())
    assert kept
    assert sets == [SET_A.id]
    assert [row[0] for row in table_rows(engine, "quotes")] == ["q-1", "q-2", "q-3"]


@pytest.mark.postgres
def test_a_keyed_quote_deletes_the_claim_on_its_key_in_its_statement(engine: Engine) -> None:
    """From the loop and from a thread: the claim on mixed_group's one keyed quote ("acme",
    "retry-1") goes with its insert; the other tenant's claim on the same key and the tenant's
    other key stay. A statement that fails on its constraint deletes nothing."""
    add_claims(engine, CLAIMS_AROUND_THE_KEYED_QUOTE)
    quotes = mixed_group()
    commit(inserts_for(engine), quotes, set())
    assert claims_left(engine) == [("acme", "retry-2"), ("other", "retry-1")]

    add_claims(engine, [("acme", "retry-1")])  # a second request under the stored key
    clashing = mixed_group()[2:3]
    clashing[0].id = "q-3-again"
    with pytest.raises(IntegrityError):
        inserts_for(engine).commit_blocking(clashing, set(), lambda: stamp_with(clashing))
    assert claims_left(engine) == CLAIMS_AROUND_THE_KEYED_QUOTE

    empty(engine)
    add_claims(engine, CLAIMS_AROUND_THE_KEYED_QUOTE)
    again = mixed_group()
    inserts_for(engine).commit_blocking(again, {SET_A.id}, lambda: stamp_with(again))
    assert claims_left(engine) == [("acme", "retry-2"), ("other", "retry-1")]


@pytest.mark.postgres
def test_a_lock_held_past_the_statement_timeout_fails_and_drops_the_connection(
    engine: Engine, postgres_url: str
) -> None:
    """Another transaction holds the table (an operator's LOCK TABLE): the insert gives up
    after the 300 ms statement/lock timeout, writes nothing and reconnects next time."""
    inserts = inserts_for(engine)
    blocker = create_engine(postgres_url)

    async def run() -> type[BaseException]:
        with blocker.begin() as connection:
            connection.execute(text("LOCK TABLE quotes IN EXCLUSIVE MODE"))
            quotes = mixed_group()
            try:
                await inserts.commit(quotes, set(), lambda: stamp_with(quotes))
            except (psycopg.Error, TimeoutError) as error:
                failure = type(error)
            assert inserts._held is None
        quotes = mixed_group()
        await inserts.commit(quotes, set(), lambda: stamp_with(quotes))
        inserts.close()
        return failure

    failure = asyncio.run(run())
    blocker.dispose()
    # the statement or the lock timeout, whichever the server checks first (both 300 ms)
    assert issubclass(failure, (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable))
    assert len(table_rows(engine, "quotes")) == 4  # the second attempt's, once


def test_an_unreachable_server_fails_before_stamping() -> None:
    engine = create_engine("postgresql+psycopg://quotes:quotes@127.0.0.1:1/quotes")
    inserts = PostgresQuoteInserts(engine, Settings(database_url=str(engine.url)))
    stamped: list[datetime] = []
    quotes = mixed_group()

    async def run() -> None:
        await inserts.commit(quotes, set(), lambda: stamped.append(STAMP) or STAMP)

    with pytest.raises(psycopg.OperationalError):
        asyncio.run(run())
    assert stamped == [] and quotes[0].created_at == PLACEHOLDER


def test_a_group_fits_in_one_statement_up_to_postgres_parameter_limit() -> None:
    """13 quote columns and 3 factor set columns: 16 parameters per quote at most (a quote
    naming a new set), so 65,535 // 16 = 4,095 quotes fit one statement, 4,096 do not; a quote
    stored under an idempotency key adds its claim's (tenant, key) to delete: 18, so
    65,535 // 18 = 3,640 keyed quotes fit (65,520 parameters), 3,641 do not (65,538)."""
    engine = create_engine("postgresql+psycopg://quotes:quotes@127.0.0.1:1/quotes")
    inserts = PostgresQuoteInserts(engine, Settings(database_url=str(engine.url)))
    assert MAX_PARAMETERS == 65_535
    group = mixed_group()
    plain = [quote for quote in group if quote.idempotency_key is None]
    keyed = [quote for quote in group if quote.idempotency_key is not None]
    assert len(plain) == 3 and len(keyed) == 1
    assert inserts.fits(plain * 1365)  # 4,095
    assert not inserts.fits(plain * 1365 + plain[:1])  # 4,096
    assert inserts.fits(keyed * 3640)
    assert not inserts.fits(keyed * 3641)
    # 4,000 quotes of which 95 keyed: 64,000 + 190 = 64,190 fit; with 800 keyed, 65,600 do not
    assert inserts.fits(plain * 1301 + plain[:2] + keyed * 95)
    assert not inserts.fits(plain * 1066 + plain[:2] + keyed * 800)


def test_only_postgres() -> None:
    engine = create_engine("sqlite://")
    with pytest.raises(ValueError, match="PostgreSQL"):
        PostgresQuoteInserts(engine, Settings(database_url="sqlite://"))
