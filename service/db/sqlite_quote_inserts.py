"""SQLite: a group of quotes inserted and committed on one held sqlite3 connection, the
backend's one INSERT implementation (and, on the same connection, the claim of a new
idempotency key).

The event loop commits the estimate path's quotes itself (service/quotes/sqlite_sink.py), so
every microsecond of a commit is a microsecond of every request's latency. Through SQLAlchemy
Core a one-quote transaction costs more Python (pool checkout, statement cache lookup, parameter
processing, result set, reset on return) than SQLite work; here the loop keeps one connection
checked out of the in-loop engine for good and runs two prepared statements on it, and each
thread that commits (the sink's, the spool replayer's) holds one of the main engine.

The rows are built by service/db/quote_insert_rows.py; tests/db/test_sqlite_quote_inserts.py
reads them back through the ORM.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Engine
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import PoolProxiedConnection

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
    release_sql,
)
from service.db.sqlite_guard import (
    OPENED_ON,
    FileId,
    FileReplaced,
    SqliteGuard,
    is_lock_timeout,
)
from service.db.tables import NewQuote

# sqlite3's named parameters (`:name`).
CLAIM_NEW_KEY_SQL = claim_new_key_sql(lambda column: f":{column}")


class SqliteQuoteInserts:
    """Commits groups of quotes on one connection of `engine` (a SQLite engine), checked out at
    the first commit and kept until a failure other than a taken lock, or `close`.

    Not thread-safe: one event loop thread uses it.
    """

    def __init__(
        self, engine: Engine, guard: SqliteGuard | None = None, *, notes_lock_timeouts: bool = True
    ) -> None:
        """`guard` (service/db/sqlite_guard.py) checks each commit first, as the engine's own
        statements are checked; unless not `notes_lock_timeouts` (the event loop's engine,
        which never waits), a commit that waited out the busy timeout starts its back-off."""
        if engine.dialect.name != "sqlite":
            raise ValueError(f"SqliteQuoteInserts needs a SQLite engine, not {engine.dialect.name}")
        self.engine = engine
        self.guard = guard
        self.notes_lock_timeouts = notes_lock_timeouts
        self._held: PoolProxiedConnection | None = None
        self._held_on: FileId | None = None  # the file `_held` was opened on
        self._quote_rows = InsertRows(engine.dialect, QUOTES)
        self._set_rows = InsertRows(engine.dialect, FACTOR_SETS)
        self._quote_sql = self._quote_rows.insert_sql("?")
        # A set stored already is the same set (its id is its content's sha256).
        self._set_sql = self._set_rows.insert_sql("?") + " ON CONFLICT DO NOTHING"
        self._release_sql = release_sql("?")
        self._claim_rows = InsertRows(engine.dialect, CLAIMS)

    def commit(
        self,
        quotes: Sequence[NewQuote],
        stored_sets: Collection[str],
        stamp: Callable[[], datetime],
    ) -> list[str]:
        """Insert `quotes` in one transaction and commit, deleting the idempotency claims on
        the keys they are stored under in it; returns the ids of the carbon factor sets inserted
        with them (those their documents name that are not in `stored_sets`).

        The write lock is taken first (`BEGIN IMMEDIATE`), then `stamp()` sets the quotes'
        `created_at` and returns it, so a quote is stamped only once nothing can keep it from
        committing but the insert itself. Raises sqlite3.Error with nothing written: SQLITE_BUSY
        when another connection holds the lock (this engine's busy timeout decides how long it
        waited), IntegrityError for a constraint (a duplicate idempotency key).
        """
        if self.guard is not None:
            self._check(self.guard)
        connection = self._connection()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                now = stamp()
                sets = new_factor_sets(quotes, stored_sets)
                if sets:
                    rows = [(factors.id, factors, now) for factors in sets]
                    connection.executemany(self._set_sql, self._set_rows.processed(rows))
                rows = [quote_values(quote) for quote in quotes]
                connection.executemany(self._quote_sql, self._quote_rows.processed(rows))
                keys = claimed_keys(quotes)
                if keys:
                    connection.executemany(self._release_sql, keys)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            self._failed(error)
            raise
        return [factors.id for factors in sets]

    def claim_new_key(self, tenant: str, key: str, holder: str, now: datetime) -> bool:
        """Claim `key` of `tenant` for `holder` at `now` (aware), if no quote is stored under it
        and it is not claimed: one statement, committed; whether it was. Raises sqlite3.Error
        as `commit` (SQLITE_BUSY while another connection holds the write lock)."""
        if self.guard is not None:
            self._check(self.guard)
        connection = self._connection()
        (values,) = self._claim_rows.processed([(tenant, key, holder, now)])
        parameters = dict(zip(CLAIM_COLUMNS, values, strict=True))
        try:
            cursor = connection.execute(CLAIM_NEW_KEY_SQL, parameters)
        except sqlite3.Error as error:
            self._failed(error)
            raise
        return cursor.rowcount == 1

    def _failed(self, error: sqlite3.Error) -> None:
        """After a failed write: a lock waited out starts the guard's back-off; a disk or file
        error drops the connection (connect afresh next time)."""
        if is_lock_timeout(error):
            if self.guard is not None and self.notes_lock_timeouts:
                self.guard.note_lock_timeout()
        elif error.sqlite_errorcode != sqlite3.SQLITE_CONSTRAINT:
            self.close(invalidate=True)

    def _check(self, guard: SqliteGuard) -> None:
        """The guard's check of a write on the held connection (on one about to be opened when
        none is held). A connection opened on a file no longer at the path is discarded and
        the check made for a new one, which opens on the file there now (if any)."""
        try:
            guard.check("BEGIN IMMEDIATE", self._held_on)
        except FileReplaced:
            if self._held is None:
                raise
            self.close(invalidate=True)
            guard.check("BEGIN IMMEDIATE")

    def close(self, *, invalidate: bool = False) -> None:
        """Give the connection back to the engine's pool (or discard it, `invalidate`)."""
        held, self._held, self._held_on = self._held, None, None
        if held is None:
            return
        if invalidate:
            held.invalidate()
        else:
            held.close()

    def _connection(self) -> sqlite3.Connection:
        if self._held is None:
            self._held = self.engine.raw_connection()
            held = cast(sqlite3.Connection, self._held.driver_connection)
            # Transactions are begun and ended by the statements above, not by the driver (set
            # once: the connection is this object's until `close`).
            held.isolation_level = None
            self._held_on = self._held.info.get(OPENED_ON)
        driver: DBAPIConnection | None = self._held.driver_connection
        return cast(sqlite3.Connection, driver)
