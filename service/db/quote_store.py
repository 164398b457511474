"""Durable storage of quotes for the estimate path, which must answer even when the database
cannot: each save is its own short, bounded transaction and reports failure instead of raising
a database error. With a spool configured, quotes the database refuses are spooled instead.

(The request-scoped session of the other routes cannot serve here: a quote id may only be
returned once its row is committed, so the commit has to happen before the response is built.)
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from service.db.base import utc_now
from service.db.engine import Database
from service.db.postgres_quote_inserts import PostgresQuoteInserts
from service.db.quote_document import QuoteDocument, json_time
from service.db.repositories import (
    IdempotencyClaimRepository,
    QuoteRepository,
    quote_id_by_key,
    stored_response,
)
from service.db.spool import QuoteSpool
from service.db.sqlite_quote_inserts import SqliteQuoteInserts
from service.db.store_outcomes import (
    DuplicateIdempotencyKey,
    KeyClaimed,
    Saved,
    StoreFailed,
    StoreRefused,
)
from service.db.tables import NewQuote, Quote

logger = logging.getLogger(__name__)
MAX_REMEMBERED_FACTOR_SETS = 4096  # a bound, as for the estimator's request contexts


@dataclass(frozen=True, slots=True)
class StoredQuote:
    """What an idempotent retry is answered from: the fingerprint of the request first stored
    under its key, and that quote's whole response document (as its caller was answered)."""

    request_hash: str | None
    response: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Claim:
    """This process's claim on an idempotency key (released when its quote is stored)."""

    tenant: str
    key: str
    holder: str


class QuoteStore:
    def __init__(
        self,
        database: Database,
        spool: QuoteSpool | None = None,
        *,
        claim_lease_s: float = 20.0,
    ) -> None:
        self.database = database
        self.spool = spool
        self.claim_lease_s = claim_lease_s
        self.holder = secrets.token_hex(8)  # this process (one store per app)
        # Carbon factor sets seen committed: a set is never changed or deleted (its id is its
        # content's sha256), so a quote naming one of these need not store it again.
        self._stored_factor_sets: set[str] = set()
        self._per_thread = threading.local()
        self._blocking_postgres: PostgresQuoteInserts | None = None

    def save(self, quotes: Sequence[NewQuote]) -> Saved:
        """Commit `quotes` in one transaction from this thread, or spool them; raises
        StoreFailed or DuplicateIdempotencyKey.

        `created_at` (row and response) is stamped once the connection is held, so a quote
        commits at most one statement/busy timeout after its `created_at` (the billing pull's
        settle window relies on it).
        """
        try:
            self.commit(quotes)
        except StoreRefused as error:
            logger.warning("could not store %d quote(s): %s", len(quotes), error)
            return self.spool_instead(quotes, str(error))
        return Saved.STORED

    def commit(self, quotes: Sequence[NewQuote], *, stamp: bool = True) -> None:
        """Commit `quotes` in one transaction from this thread, through the backend's one
        INSERT implementation (service/db/sqlite_quote_inserts.py,
        service/db/postgres_quote_inserts.py), as the event loop's commits are; `stamp`: set
        their `created_at` once the connection is held (a replayed quote keeps its own).
        Raises DuplicateIdempotencyKey, or StoreRefused with nothing written."""
        try:
            if self.database.backend == "sqlite":
                self.commit_sqlite(quotes, self._thread_sqlite_inserts(), stamp=stamp)
                return
            new_sets = self._postgres_inserts().commit_blocking(
                quotes, self._stored_factor_sets, _stamper(quotes, stamp)
            )
        except (IntegrityError, sqlite3.IntegrityError) as error:
            raise DuplicateIdempotencyKey() from error
        except (SQLAlchemyError, sqlite3.Error, OSError) as error:
            self._stored_factor_sets.clear()  # the database may come back as another one
            raise StoreRefused(str(error)) from error
        self._remember(new_sets)

    def commit_replayed(self, quotes: Sequence[NewQuote]) -> None:
        """`commit` of quotes replayed from the spool, which keep their own `created_at`."""
        self.commit(quotes, stamp=False)

    def _thread_sqlite_inserts(self) -> SqliteQuoteInserts:
        """This thread's inserts on the database's current engine (the sink's and the spool
        replayer's threads each hold one connection; a swapped engine gets a new one)."""
        engine = self.database.engine
        held: SqliteQuoteInserts | None = getattr(self._per_thread, "inserts", None)
        if held is None or held.engine is not engine:
            if held is not None:
                held.close(invalidate=True)
            held = self._per_thread.inserts = SqliteQuoteInserts(engine, self.database.sqlite_guard)
        return held

    def _postgres_inserts(self) -> PostgresQuoteInserts:
        """The statement builder for the database's current engine (thread-safe to share: the
        blocking commit takes its connection from the engine's pool)."""
        engine = self.database.engine
        held = self._blocking_postgres
        if held is None or held.engine is not engine:
            held = self._blocking_postgres = PostgresQuoteInserts(engine, self.database.settings)
        return held

    def commit_sqlite(
        self, quotes: Sequence[NewQuote], inserts: SqliteQuoteInserts, *, stamp: bool = True
    ) -> None:
        """Commit `quotes` on the held SQLite connection of `inserts` (the event loop's or a
        thread's), stamping them once the write lock is held (unless not `stamp`); raises
        sqlite3.Error, with nothing written."""
        try:
            new_sets = inserts.commit(quotes, self._stored_factor_sets, _stamper(quotes, stamp))
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error:
            self._stored_factor_sets.clear()  # the database may come back as another one
            raise
        self._remember(new_sets)

    async def commit_postgres(
        self, quotes: Sequence[NewQuote], inserts: PostgresQuoteInserts
    ) -> None:
        """Commit `quotes` by one statement on the event loop's asyncio connection held by
        `inserts` (service/db/postgres_quote_inserts.py); raises as its `commit`."""
        try:
            new_sets = await inserts.commit(
                quotes, self._stored_factor_sets, _stamper(quotes, True)
            )
        except psycopg.IntegrityError:
            raise
        except BaseException:
            self._stored_factor_sets.clear()  # the database may come back as another one
            raise
        self._remember(new_sets)

    def _remember(self, committed_sets: list[str]) -> None:
        if len(self._stored_factor_sets) > MAX_REMEMBERED_FACTOR_SETS:
            self._stored_factor_sets.clear()
        self._stored_factor_sets.update(committed_sets)

    def spool_instead(self, quotes: Sequence[NewQuote], reason: str) -> Saved:
        """Spool `quotes` without trying the database (which just refused them, for `reason`);
        raises StoreFailed when there is no spool or the disk fails too."""
        if self.spool is None:
            raise StoreFailed(reason)
        try:
            self.spool.append(quotes)
        except OSError as error:
            logger.error("could not spool %d quote(s): %s", len(quotes), error)
            raise StoreFailed(str(error)) from error
        return Saved.SPOOLED

    def claim(self, tenant: str, key: str) -> Claim:
        """Claim `key` for this process; KeyClaimed while another process holds a live claim,
        StoreFailed when the database cannot be asked."""
        now = utc_now()
        claim = Claim(tenant, key, self.holder)
        engine = self.database.engine
        try:
            try:
                with engine.begin() as connection:
                    IdempotencyClaimRepository(connection).add(
                        tenant, key, holder=self.holder, now=now
                    )
                return claim
            except IntegrityError:
                pass
            # Claimed already: by this process (an earlier attempt whose release failed; the
            # in-process guard says none is running now), or by a process that died.
            with engine.begin() as connection:
                taken = IdempotencyClaimRepository(connection).take_over(
                    tenant,
                    key,
                    holder=self.holder,
                    now=now,
                    stale_before=now - timedelta(seconds=self.claim_lease_s),
                )
        except SQLAlchemyError as error:
            raise StoreFailed(str(error)) from error
        if not taken:
            raise KeyClaimed(key)
        return claim

    def in_spool(self, tenant: str, key: str) -> bool:
        """Whether a quote of `tenant` under `key` waits in the spool (raises OSError)."""
        return self.spool is not None and self.spool.find(tenant, key) is not None

    def release(self, claim: Claim) -> None:
        """Drop the claim of a quote that was not stored (best effort: a claim left behind
        expires after the lease); a stored quote's insert deletes it."""
        try:
            with self.database.engine.begin() as connection:
                claims = IdempotencyClaimRepository(connection)
                claims.release(claim.tenant, claim.key, claim.holder)
        except SQLAlchemyError as error:
            logger.warning("could not release idempotency claim %r: %s", claim.key, error)

    def by_idempotency_key(self, tenant: str, key: str) -> StoredQuote | None:
        """The tenant's quote stored (or spooled) under `key`; StoreFailed when unreadable.
        A key is looked up by one Core query (most are new); only a stored quote is loaded."""
        try:
            with self.database.engine.connect() as connection:
                quote_id = quote_id_by_key(connection, tenant, key)
            if quote_id is not None:
                with self.database.sessions() as session:
                    found = QuoteRepository(session).by_id(quote_id)
                    if found is not None:
                        return StoredQuote(found.request_hash, stored_response(session, found))
        except SQLAlchemyError as error:
            if self.spool is None:
                raise StoreFailed(str(error)) from error
            return _spooled(self.spool.find(tenant, key))
        return None if self.spool is None else _spooled(self.spool.find(tenant, key))


def _spooled(quote: Quote | None) -> StoredQuote | None:
    """A spooled quote (spooled whole, factors in) as an idempotent retry reads it."""
    return None if quote is None else StoredQuote(quote.request_hash, quote.response)


def _stamper(quotes: Sequence[NewQuote], stamp: bool) -> Callable[[], datetime]:
    """What an insert calls once it holds its connection: stamp `quotes` now (or, replayed
    quotes, leave them as they are) and return the time."""
    return (lambda: _stamp_now(quotes)) if stamp else utc_now


def _stamp_now(quotes: Sequence[NewQuote]) -> datetime:
    now = utc_now()
    _stamp(quotes, now)
    return now


def _stamp(quotes: Sequence[NewQuote], now: datetime) -> None:
    stamp = json_time(now)
    for quote in quotes:
        quote.created_at = now
        if isinstance(quote.response, QuoteDocument):
            quote.response.created_at = stamp
        else:
            quote.response = {**quote.response, "created_at": stamp}
