"""Declarative base with a constraint naming convention, a UTC timestamp type and a JSON type
that stores a serialised quote document as it is."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, MetaData
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

from service.db.quote_document import CarbonFactorSet, QuoteDocument

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive, in UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTCDateTime column")
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        stamp: datetime = value
        if stamp.tzinfo is None:
            return stamp.replace(tzinfo=UTC)
        return stamp.astimezone(UTC)


class DocumentJSON(TypeDecorator[Any]):
    """A JSON column that also takes a `QuoteDocument` or a `CarbonFactorSet`: their text,
    serialised once when the quote was answered, is stored as it is instead of being parsed
    and encoded again (a document without the factors its set holds).

    Other values (dicts, lists) go through the dialect's JSON processing unchanged; reading
    gives the parsed document either way."""

    impl = JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        # Overridden (rather than process_bind_param) because a QuoteDocument must skip the
        # JSON type's own serialiser, which would encode its text as one JSON string.
        serialise = self.impl_instance.bind_processor(dialect)

        def process(value: Any) -> Any:
            if isinstance(value, QuoteDocument):
                return value.stored_text()
            if isinstance(value, CarbonFactorSet):
                return value.json
            return serialise(value) if serialise is not None else value

        return process


def utc_now() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
