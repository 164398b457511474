"""Quote and carbon factor set rows as a database driver takes them, for the one INSERT
implementation of each backend, which skips SQLAlchemy's per-statement Python (SQLite:
service/db/sqlite_quote_inserts.py; PostgreSQL: service/db/postgres_quote_inserts.py).

Every column, each value passed through the bind processor SQLAlchemy's dialect would apply to
it (the JSON columns' serialiser, the UTC timestamps' conversion), taken from the table's own
column types, so that the ORM reads the rows back as written (tests/db/test_sqlite_quote_inserts.py
and test_postgres_quote_inserts.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from operator import attrgetter
from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.engine import Dialect

from service.db.quote_document import CarbonFactorSet, QuoteDocument
from service.db.tables import IdempotencyClaim, NewQuote, Quote, StoredFactorSet

QUOTES = cast(Table, Quote.__table__)
FACTOR_SETS = cast(Table, StoredFactorSet.__table__)
CLAIMS = cast(Table, IdempotencyClaim.__table__)
BindProcessor = Callable[[Any], Any] | None
_NOTHING = object()  # no value processed yet


class InsertRows:
    """Every column of `table`: their names and each one's bind processor in `dialect`."""

    def __init__(self, dialect: Dialect, table: Table) -> None:
        self.table = table.name
        self.columns = ", ".join(column.name for column in table.columns)
        self.width = len(table.columns)
        self.processors: list[BindProcessor] = [
            column.type.dialect_impl(dialect).bind_processor(dialect) for column in table.columns
        ]
        # The columns that have a processor (a few of a quote's), with it: only those are
        # visited per row.
        self._processed_columns = [
            (column, process) for column, process in enumerate(self.processors) if process
        ]

    def insert_sql(self, placeholder: str, rows: int = 1) -> str:
        """`INSERT INTO table (every column) VALUES (...), ...` for `rows` rows, each value
        marked by the driver's `placeholder` ("?" for sqlite3, "%s" for psycopg)."""
        row = "(" + ", ".join([placeholder] * self.width) + ")"
        return f"INSERT INTO {self.table} ({self.columns}) VALUES " + ", ".join([row] * rows)

    def processed(self, rows: list[tuple[Any, ...]]) -> list[list[Any]]:
        """`rows` (values in column order) with each value passed through its column's
        processor (None too, as SQLAlchemy does: a JSON column stores None as JSON `null`).

        A value that is the very object of the row before (a group's one `created_at` stamp,
        the nulls) is processed once: the processors are pure functions of their value."""
        processed = [list(row) for row in rows]
        for column, process in self._processed_columns:
            last: Any = _NOTHING
            done: Any = None
            for row in processed:
                value = row[column]
                if value is not last:
                    last, done = value, process(value)
                row[column] = done
        return processed


# A quote's column values in table order, as a tuple.
quote_values = attrgetter(*(column.key for column in QUOTES.columns))


def new_factor_sets(
    quotes: Sequence[NewQuote], stored_sets: Collection[str]
) -> list[CarbonFactorSet]:
    """The distinct carbon factor sets `quotes`' documents name that are not in `stored_sets`,
    in order of first appearance."""
    found: dict[str, CarbonFactorSet] = {}
    for quote in quotes:
        document = quote.response
        if isinstance(document, QuoteDocument) and document.factors.id not in stored_sets:
            found.setdefault(document.factors.id, document.factors)
    return list(found.values())


def claimed_keys(quotes: Sequence[NewQuote]) -> list[tuple[str, str]]:
    """(tenant, idempotency key) of each of `quotes` stored under a key: the claims the
    transaction that stores them deletes. Whichever process holds such a claim, it is moot once
    the quote is committed: a later request with the key finds the quote before it claims, and
    a process still pricing under a claim it took over fails its insert on the unique key and
    answers the stored quote."""
    return [(q.tenant, q.idempotency_key) for q in quotes if q.idempotency_key is not None]


CLAIM_COLUMNS = tuple(column.name for column in CLAIMS.columns)
"""The claims' columns, in table order: the named parameters of `claim_new_key_sql`."""


def claim_new_key_sql(parameter: Callable[[str], str]) -> str:
    """`INSERT` of the claim on a new idempotency key, unless a quote is stored under the key
    or it is claimed already (which of the two held is left to the caller's thread): one
    statement. `parameter(column)` marks the named parameter of that column as the driver
    takes it."""
    values = ", ".join(parameter(name) for name in CLAIM_COLUMNS)
    return (
        f"INSERT INTO {CLAIMS.name} ({', '.join(CLAIM_COLUMNS)}) SELECT {values} "
        f"WHERE NOT EXISTS (SELECT 1 FROM {QUOTES.name} WHERE "
        f"{QUOTES.c.tenant.name} = {parameter('tenant')} AND "
        f"{QUOTES.c.idempotency_key.name} = {parameter('idempotency_key')}) "
        "ON CONFLICT DO NOTHING"
    )


def release_sql(placeholder: str) -> str:
    """`DELETE` of the claim on one (tenant, key), each marked by the driver's `placeholder`."""
    return (
        f"DELETE FROM {CLAIMS.name} WHERE {CLAIMS.c.tenant.name} = {placeholder} "
        f"AND {CLAIMS.c.idempotency_key.name} = {placeholder}"
    )
