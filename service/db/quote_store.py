"""Durable storage of quotes for the estimate path, which must answer even when the database
cannot: each save is its own short, bounded transaction and reports failure instead of raising
a database error. With a spool configured, quotes the database refuses are spooled instead.

(The request-scoped session of the other routes cannot serve here: a quote id may only be
returned once its row is committed, so the commit has to happen before the response is built.)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from enum import StrEnum

from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from service.db.engine import Database
from service.db.models import Quote
from service.db.repositories import QuoteRepository
from service.db.spool import QuoteSpool

logger = logging.getLogger(__name__)


class StoreFailed(Exception):
    """Neither the database nor the spool could take (or read) quotes right now."""


class DuplicateIdempotencyKey(Exception):
    """Another request stored a quote under the same idempotency key first."""


class Saved(StrEnum):
    STORED = "stored"
    SPOOLED = "spooled"


class QuoteStore:
    def __init__(self, database: Database, spool: QuoteSpool | None = None) -> None:
        self.database = database
        self.spool = spool

    def save(self, quotes: Sequence[Quote]) -> Saved:
        """Commit `quotes` in one transaction, or spool them; raises StoreFailed or
        DuplicateIdempotencyKey."""
        try:
            with self.database.sessions.begin() as session:
                QuoteRepository(session).add_all(quotes)
            return Saved.STORED
        except IntegrityError as error:
            raise DuplicateIdempotencyKey() from error
        except SQLAlchemyError as error:
            logger.warning("could not store %d quote(s): %s", len(quotes), error)
            if self.spool is None:
                raise StoreFailed(str(error)) from error
        try:
            self.spool.append(quotes)
        except OSError as error:
            logger.error("could not spool %d quote(s): %s", len(quotes), error)
            raise StoreFailed(str(error)) from error
        return Saved.SPOOLED

    def by_idempotency_key(self, tenant: str, key: str) -> Quote | None:
        """The tenant's quote stored (or spooled) under `key`; StoreFailed when unreadable."""
        try:
            with self.database.sessions() as session:
                found = QuoteRepository(session).by_idempotency_key(tenant, key)
        except SQLAlchemyError as error:
            if self.spool is None:
                raise StoreFailed(str(error)) from error
            return self.spool.find(tenant, key)
        if found is None and self.spool is not None:
            return self.spool.find(tenant, key)
        return found
