"""SQLite: the one INSERT implementation (service/db/sqlite_quote_inserts.py) writes rows the ORM
reads back as the quotes written, and fails as the commits of the loop and the writer thread
expect."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

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
    mixed_group,
    stamp_with,
)
from sqlalchemy import Engine, create_engine

from service.config import Settings
from service.db import migrate
from service.db.engine import build_engine, build_in_loop_engine
from service.db.quote_insert_rows import QUOTES, InsertRows
from service.db.sqlite_quote_inserts import SqliteQuoteInserts

ZONE = timezone(timedelta(hours=2))


def table_rows(path: Path, table: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as connection:
        return connection.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    paths = tmp_path / "core.sqlite3", tmp_path / "held.sqlite3"
    for path in paths:
        migrate.upgrade(f"sqlite:///{path}")
        with sqlite3.connect(path) as connection:  # as the service's engines leave it
            connection.execute("PRAGMA journal_mode=WAL")
    return paths


@pytest.fixture
def held(files: tuple[Path, Path]) -> Iterator[SqliteQuoteInserts]:
    engine = build_in_loop_engine(Settings(database_url=f"sqlite:///{files[1]}"))
    assert engine is not None
    inserts = SqliteQuoteInserts(engine)
    yield inserts
    inserts.close()
    engine.dispose()


def test_the_rows_read_back_through_the_orm_are_the_quotes_written(
    files: tuple[Path, Path], held: SqliteQuoteInserts
) -> None:
    quotes = mixed_group()

    held_sets = held.commit(quotes, set(), lambda: stamp_with(quotes))

    assert held_sets == [SET_A.id, SET_B.id]
    engine = build_engine(Settings(database_url=f"sqlite:///{files[1]}"))
    try:
        assert_read_back(engine, quotes)
    finally:
        engine.dispose()
    stored = {row[0]: row for row in table_rows(files[1], "quotes")}
    assert stored["q-1"][11] == "2026-11-25 06:30:15.123456"  # naive UTC text, as SQLAlchemy


def test_sets_stored_already_are_not_inserted_again(
    files: tuple[Path, Path], held: SqliteQuoteInserts
) -> None:
    quotes = mixed_group()
    assert held.commit(quotes, {SET_A.id}, lambda: stamp_with(quotes)) == [SET_B.id]
    assert [row[0] for row in table_rows(files[1], "carbon_factor_sets")] == [SET_B.id]


def test_a_taken_lock_writes_nothing_stamps_nothing_and_keeps_the_connection(
    files: tuple[Path, Path], held: SqliteQuoteInserts
) -> None:
    other = sqlite3.connect(files[1], isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    stamped: list[datetime] = []
    quotes = mixed_group()
    with pytest.raises(sqlite3.OperationalError) as refused:
        held.commit(quotes, set(), lambda: stamped.append(STAMP) or STAMP)
    assert refused.value.sqlite_errorcode == sqlite3.SQLITE_BUSY
    assert stamped == [] and quotes[0].created_at == PLACEHOLDER
    connection = held._held
    other.execute("ROLLBACK")
    other.close()

    held.commit(quotes, set(), lambda: stamp_with(quotes))

    assert held._held is connection  # the same connection, not reopened
    assert len(table_rows(files[1], "quotes")) == 4


def test_a_constraint_fails_the_whole_group_and_the_next_commits(
    files: tuple[Path, Path], held: SqliteQuoteInserts
) -> None:
    first = mixed_group()
    held.commit(first[2:3], set(), lambda: stamp_with(first))  # "retry-1" stored
    clashing = mixed_group()
    clashing[2].id = "q-3-again"  # same idempotency key, new id
    with pytest.raises(sqlite3.IntegrityError):
        held.commit(clashing, set(), lambda: stamp_with(clashing))
    assert [row[0] for row in table_rows(files[1], "quotes")] == ["q-3"]

    fine = mixed_group()[:2]
    held.commit(fine, set(), lambda: stamp_with(fine))
    assert [row[0] for row in table_rows(files[1], "quotes")] == ["q-1", "q-2", "q-3"]


def test_a_keyed_quote_deletes_the_claim_on_its_key_in_its_transaction(
    files: tuple[Path, Path], held: SqliteQuoteInserts
) -> None:
    """The claim on mixed_group's one keyed quote ("acme", "retry-1") goes with its commit;
    the other tenant's claim on the same key and the tenant's other key stay. A group that
    fails on its constraint deletes nothing."""
    engine = create_engine(f"sqlite:///{files[1]}")
    try:
        add_claims(engine, CLAIMS_AROUND_THE_KEYED_QUOTE)
        quotes = mixed_group()
        held.commit(quotes, set(), lambda: stamp_with(quotes))
        assert claims_left(engine) == [("acme", "retry-2"), ("other", "retry-1")]

        add_claims(engine, [("acme", "retry-1")])  # a second request under the stored key
        clashing = mixed_group()[2:3]
        clashing[0].id = "q-3-again"
        with pytest.raises(sqlite3.IntegrityError):
            held.commit(clashing, set(), lambda: stamp_with(clashing))
        assert claims_left(engine) == CLAIMS_AROUND_THE_KEYED_QUOTE
    finally:
        engine.dispose()


def test_a_file_error_drops_the_connection(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'missing-dir' / 'quotes.sqlite3'}")
    inserts = SqliteQuoteInserts(engine)
    quotes = mixed_group()
    with pytest.raises(sqlite3.OperationalError):
        inserts.commit(quotes, set(), lambda: stamp_with(quotes))
    assert inserts._held is None


def test_only_sqlite(tmp_path: Path) -> None:
    engine: Engine = create_engine("postgresql+psycopg://quotes:quotes@127.0.0.1:1/quotes")
    with pytest.raises(ValueError, match="SQLite"):
        SqliteQuoteInserts(engine)


def test_a_value_repeated_from_the_row_before_is_processed_as_its_own() -> None:
    """Rows sharing one `created_at` object (a group's stamp) and rows with their own (replayed
    quotes) each get their own column value: SQLite's text of the UTC time, written by hand."""
    engine = create_engine("sqlite://")
    rows = InsertRows(engine.dialect, QUOTES)
    at = QUOTES.columns.keys().index("created_at")
    later = datetime(2026, 11, 25, 7, 0, tzinfo=UTC)
    stamps = [STAMP, STAMP, later, STAMP, datetime(2026, 11, 25, 8, 30, 15, 123456, tzinfo=ZONE)]
    values = [tuple(stamp if i == at else None for i in range(rows.width)) for stamp in stamps]
    texts = [row[at] for row in rows.processed(values)]
    assert texts == [
        "2026-11-25 06:30:15.123456",
        "2026-11-25 06:30:15.123456",
        "2026-11-25 07:00:00.000000",
        "2026-11-25 06:30:15.123456",
        "2026-11-25 06:30:15.123456",  # 08:30:15 at UTC+2
    ]
    engine.dispose()
