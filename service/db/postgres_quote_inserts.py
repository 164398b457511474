"""PostgreSQL: a group of quotes inserted by one statement, the backend's one INSERT
implementation (and, on the same connection, the claim of a new idempotency key).

A group is one multi-row `INSERT` (its carbon factor sets inserted by a data-modifying `WITH`
in the same statement): one round trip, one implicit transaction, all of the group or nothing.
From the event loop it is sent on an asyncio connection in autocommit mode, and while the
server works the loop serves other requests (service/quotes/postgres_sink.py); from a thread
(the sink's, the spool replayer's) the same statement goes through the engine's pool. psycopg
prepares a statement text it has run five times, so the group sizes that recur are parsed once
per connection.

The rows are built by service/db/quote_insert_rows.py (each value through its column type's bind
processor, as SQLAlchemy would); tests/db/test_postgres_quote_inserts.py reads them back through
the ORM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy import Engine

from service.config import Settings
from service.db.engine import postgres_connect_args
from service.db.quote_insert_rows import (
    CLAIM_COLUMNS,
    CLAIMS,
    FACTOR_SETS,
    QUOTES,
    InsertRows,
    claim_new_key_sql,
    claimed_keys,
    new_factor_sets,
    quote_values,
)
from service.db.tables import NewQuote

# psycopg's named parameters (`%(name)s`). One parameter stands for every place its name
# appears, so each is cast to one type: varchar (unbounded: a cast to varchar(n) would
# truncate), the time timestamptz.
CLAIM_NEW_KEY_SQL = claim_new_key_sql(
    lambda column: f"%({column})s::" + ("timestamptz" if column == "claimed_at" else "varchar")
)
MAX_PARAMETERS = 65_535  # PostgreSQL's limit on one statement's bind parameters
MAX_REMEMBERED_STATEMENTS = 256  # statement texts by group size, a bound
NETWORK_MARGIN_S = 1.0  # beyond the server's statement timeout, for the round trip


class PostgresQuoteInserts:
    """Commits groups of quotes on one asyncio psycopg connection to `engine`'s database (a
    PostgreSQL engine), opened at the first commit and kept until a failure or `close`.

    Not thread-safe: one event loop uses it (a commit from another loop opens a new
    connection, the old one being closed).
    """

    def __init__(self, engine: Engine, settings: Settings) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError(f"PostgresQuoteInserts needs PostgreSQL, not {engine.dialect.name}")
        self.engine = engine
        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        self._connect_args: tuple[list[Any], dict[str, Any]] = (
            list(cargs),
            {**cparams, **postgres_connect_args(settings)},
        )
        self._connect_timeout_s = float(self._connect_args[1]["connect_timeout"])
        self._statement_timeout_s = settings.db_statement_timeout_ms / 1000
        self._quote_rows = InsertRows(engine.dialect, QUOTES)
        self._set_rows = InsertRows(engine.dialect, FACTOR_SETS)
        self._statements: dict[tuple[int, int, int], str] = {}
        self._held: psycopg.AsyncConnection[Any] | None = None
        self._held_loop: asyncio.AbstractEventLoop | None = None

    def fits(self, quotes: Sequence[NewQuote]) -> bool:
        """Whether `quotes` (with as many factor sets and claims) fit in one statement's
        parameters."""
        width = self._quote_rows.width + self._set_rows.width
        return len(quotes) * width + 2 * len(claimed_keys(quotes)) <= MAX_PARAMETERS

    async def commit(
        self,
        quotes: Sequence[NewQuote],
        stored_sets: Collection[str],
        stamp: Callable[[], datetime],
    ) -> list[str]:
        """Insert `quotes` in one statement (one transaction) on the event loop's connection;
        returns the ids of the carbon factor sets inserted with them (those their documents
        name that are not in `stored_sets`).

        `stamp()` sets the quotes' `created_at` and returns it once a connection is held, so
        a quote commits within the server's statement timeout of its `created_at`. Raises
        psycopg.Error (psycopg.IntegrityError for a constraint: a duplicate idempotency key),
        OSError or TimeoutError, with nothing written, or, for a connection lost during the
        statement, written or not (a spooled quote is replayed only if its id is not stored:
        service/db/spool.py); the connection is closed after any failure but a constraint's.
        """
        try:
            connection = await self._connection()
            statement, parameters, sets = self.statement(quotes, stored_sets, stamp())
            async with asyncio.timeout(self._statement_timeout_s + NETWORK_MARGIN_S):
                await connection.execute(statement, parameters)
        except psycopg.IntegrityError:
            raise
        except BaseException:  # cancelled too: mid-statement, the connection's state is unknown
            self.close()
            raise
        return sets

    async def claim_new_key(self, tenant: str, key: str, holder: str, now: datetime) -> bool:
        """Claim `key` of `tenant` for `holder` at `now` (aware) on the event loop's connection,
        if no quote is stored under it and it is not claimed; whether it was. Raises as
        `commit` (the connection is closed after any failure)."""
        values = (tenant, key, holder, now)
        parameters = dict(zip(CLAIM_COLUMNS, values, strict=True))
        try:
            connection = await self._connection()
            async with asyncio.timeout(self._statement_timeout_s + NETWORK_MARGIN_S):
                cursor = await connection.execute(CLAIM_NEW_KEY_SQL, parameters)
        except BaseException:  # cancelled too: mid-statement, the connection's state is unknown
            self.close()
            raise
        return cursor.rowcount == 1

    def commit_blocking(
        self,
        quotes: Sequence[NewQuote],
        stored_sets: Collection[str],
        stamp: Callable[[], datetime],
    ) -> list[str]:
        """`commit` from a thread, through the engine's pool (and its reconnect backoff): the
        same statement, on a connection of `engine`. Raises SQLAlchemy's errors
        (sqlalchemy.exc.IntegrityError for a constraint), with nothing written."""
        with self.engine.begin() as connection:
            statement, parameters, sets = self.statement(quotes, stored_sets, stamp())
            connection.exec_driver_sql(statement, tuple(parameters))
        return sets

    def statement(
        self, quotes: Sequence[NewQuote], stored_sets: Collection[str], now: datetime
    ) -> tuple[str, list[Any], list[str]]:
        """The one statement inserting `quotes` (stamped `now`) after the carbon factor sets
        they name that are not in `stored_sets`, and deleting the idempotency claims on the keys
        they are stored under: its text, its parameters, and those sets' ids."""
        sets = new_factor_sets(quotes, stored_sets)
        keys = claimed_keys(quotes)
        parameters = [
            value
            for row in self._set_rows.processed([(s.id, s, now) for s in sets])
            for value in row
        ]
        parameters += [value for key in keys for value in key]
        parameters += [
            value
            for row in self._quote_rows.processed([quote_values(quote) for quote in quotes])
            for value in row
        ]
        statement = self._statement(len(quotes), len(sets), len(keys))
        return statement, parameters, [s.id for s in sets]

    def close(self) -> None:
        """Close the connection (at shutdown, or after a failure); a later commit reconnects.

        Closes the socket at once, without a round trip: safe from any loop, or none."""
        held, self._held, self._held_loop = self._held, None, None
        if held is not None:
            held.pgconn.finish()

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        loop = asyncio.get_running_loop()
        if self._held is not None and (self._held_loop is not loop or self._held.closed):
            self.close()
        if self._held is None:
            cargs, cparams = self._connect_args
            async with asyncio.timeout(self._connect_timeout_s + NETWORK_MARGIN_S):
                self._held = await psycopg.AsyncConnection.connect(
                    *cargs, **cparams, autocommit=True
                )
            self._held_loop = loop
        return self._held

    def _statement(self, quote_count: int, set_count: int, key_count: int) -> str:
        """The INSERT of `quote_count` quotes after `set_count` factor sets (none stored
        twice: a set's id is its content's sha256, so one stored already is the same set) and
        the DELETE of `key_count` idempotency claims, as data-modifying `WITH`s (each runs once,
        in the statement's one transaction)."""
        key = (quote_count, set_count, key_count)
        statement = self._statements.get(key)
        if statement is None:
            before = []
            if set_count:
                sets = self._set_rows.insert_sql("%s", set_count)
                before.append(f"new_sets AS ({sets} ON CONFLICT DO NOTHING)")
            if key_count:
                keys = ", ".join(["(%s, %s)"] * key_count)
                before.append(
                    f"released AS (DELETE FROM {CLAIMS.name} WHERE "
                    f"({CLAIMS.c.tenant.name}, {CLAIMS.c.idempotency_key.name}) IN ({keys}))"
                )
            statement = self._quote_rows.insert_sql("%s", quote_count)
            if before:
                statement = "WITH " + ", ".join(before) + " " + statement
            if len(self._statements) >= MAX_REMEMBERED_STATEMENTS:
                self._statements.clear()
            self._statements[key] = statement
        return statement
