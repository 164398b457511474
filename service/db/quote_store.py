"""Durable storage of quotes for the estimate path, which must answer even when the database
cannot: each save is its own short, bounded transaction and reports failure instead of raising.

(The request-scoped session of the other routes cannot serve here: a quote id may only be
returned once its row is committed, so the commit has to happen before the response is built.)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from service.db.engine import Database
from service.db.models import Quote
from service.db.repositories import QuoteRepository

logger = logging.getLogger(__name__)


class StoreFailed(Exception):
    """The database could not store (or read) quotes right now."""


class DuplicateIdempotencyKey(Exception):
    """Another request stored a quote under the same idempotency key first."""


class QuoteStore:
    def __init__(self, database: Database) -> None:
        self.database = database

    def save(self, quotes: Sequence[Quote]) -> None:
        """Commit `quotes` in one transaction; raises StoreFailed or DuplicateIdempotencyKey."""
        try:
            with self.database.sessions.begin() as session:
                QuoteRepository(session).add_all(quotes)
        except IntegrityError as error:
            raise DuplicateIdempotencyKey() from error
        except SQLAlchemyError as error:
            logger.warning("could not store %d quote(s): %s", len(quotes), error)
            raise StoreFailed(str(error)) from error

    def by_idempotency_key(self, tenant: str, key: str) -> Quote | None:
        """The tenant's quote stored under `key`; raises StoreFailed when unreadable."""
        try:
            with self.database.sessions() as session:
                return QuoteRepository(session).by_idempotency_key(tenant, key)
        except SQLAlchemyError as error:
            raise StoreFailed(str(error)) from error
