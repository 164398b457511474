"""Repositories: every query the service runs. They flush, never commit."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import orjson
from sqlalchemy import (
    Connection,
    Table,
    Text,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy import cast as cast_to
from sqlalchemy.orm import Session

from service.db.quote_document import with_factors
from service.db.tables import (
    GLOBAL_SCOPE,
    TENANT_SCOPE,
    ApiKey,
    Calibration,
    IdempotencyClaim,
    Observation,
    Quote,
    StoredFactorSet,
)

_QUOTES = cast(Table, Quote.__table__)
_FACTOR_SETS = cast(Table, StoredFactorSet.__table__)
QUOTE_COLUMNS = tuple(column.key for column in _QUOTES.columns)
"""The `quotes` columns, in table order: what a stored or spooled quote row holds."""


_MAX_CACHED_FACTOR_SETS = 1024
_factor_set_texts: dict[str, str] = {}


def stored_response(session: Session, quote: Quote) -> dict[str, Any]:
    """`quote`'s whole response document as its caller was answered: the stored document with
    the carbon factors of its set put back (rows that keep their factors are returned as
    stored). A new dict: the ORM attribute is left as loaded."""
    set_id = quote.carbon_factor_set_id
    if set_id is None:
        return quote.response
    text = _factor_set_texts.get(set_id)
    if text is None:
        statement = select(cast_to(_FACTOR_SETS.c.factors, Text)).where(_FACTOR_SETS.c.id == set_id)
        found = session.scalars(statement).one_or_none()
        if found is None:  # a set is stored with its first quote: this cannot be
            raise LookupError(f"quote {quote.id}: carbon factor set {set_id} is not stored")
        if len(_factor_set_texts) >= _MAX_CACHED_FACTOR_SETS:
            _factor_set_texts.clear()
        text = _factor_set_texts[set_id] = found
    return with_factors(quote.response, orjson.loads(text))


class QuoteRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, quote: Quote) -> Quote:
        self.session.add(quote)
        self.session.flush()
        return quote

    def by_id(self, quote_id: str) -> Quote | None:
        """Any tenant's quote (internal use: spool replay)."""
        return self.session.get(Quote, quote_id)

    def get(self, tenant: str, quote_id: str) -> Quote | None:
        """The tenant's quote (another tenant's quote is simply not found)."""
        statement = select(Quote).where(Quote.id == quote_id, Quote.tenant == tenant)
        return self.session.scalars(statement).one_or_none()

    def by_idempotency_key(self, tenant: str, key: str) -> Quote | None:
        statement = select(Quote).where(Quote.tenant == tenant, Quote.idempotency_key == key)
        return self.session.scalars(statement).one_or_none()

    def page(
        self,
        tenant: str,
        *,
        after: tuple[datetime, str] | None,
        created_after: datetime | None,
        created_before: datetime | None,
        settled_before: datetime | None = None,
        limit: int,
    ) -> list[Quote]:
        """Up to `limit` quotes in (created_at, id) order, strictly after the keyset `after`,
        created before `settled_before` (inclusive) when given."""
        statement = select(Quote).where(Quote.tenant == tenant)
        if created_after is not None:
            statement = statement.where(Quote.created_at >= created_after)
        if created_before is not None:
            statement = statement.where(Quote.created_at < created_before)
        if settled_before is not None:
            statement = statement.where(Quote.created_at <= settled_before)
        if after is not None:
            at, quote_id = after
            statement = statement.where(
                or_(Quote.created_at > at, and_(Quote.created_at == at, Quote.id > quote_id))
            )
        statement = statement.order_by(Quote.created_at, Quote.id).limit(limit)
        return list(self.session.scalars(statement))


_CLAIMS = cast(Table, IdempotencyClaim.__table__)
# Built once, with bound parameters: constructing a statement costs more Python than running a
# cached one, and an idempotent estimate runs two of these.
_QUOTE_ID_BY_KEY = select(_QUOTES.c.id).where(
    _QUOTES.c.tenant == bindparam("tenant"), _QUOTES.c.idempotency_key == bindparam("key")
)
_INSERT_CLAIM = insert(_CLAIMS)
_TAKE_OVER_CLAIM = (  # an UPDATE's parameters may not be named as its columns
    update(_CLAIMS)
    .where(_CLAIMS.c.tenant == bindparam("of"), _CLAIMS.c.idempotency_key == bindparam("on"))
    .where(or_(_CLAIMS.c.holder == bindparam("by"), _CLAIMS.c.claimed_at < bindparam("stale")))
    .values(holder=bindparam("by"), claimed_at=bindparam("now"))
)
_RELEASE_CLAIM = delete(_CLAIMS).where(
    _CLAIMS.c.tenant == bindparam("tenant"),
    _CLAIMS.c.idempotency_key == bindparam("key"),
    _CLAIMS.c.holder == bindparam("by"),
)


def quote_id_by_key(connection: Connection, tenant: str, key: str) -> str | None:
    """The id of the tenant's quote stored under idempotency `key`, if any."""
    found = connection.execute(_QUOTE_ID_BY_KEY, {"tenant": tenant, "key": key}).scalar()
    return cast(str | None, found)


class IdempotencyClaimRepository:
    """Claims on idempotency keys in flight, in Core statements on a connection; each write is
    meant to be its own transaction (the quote's insert deletes a claim in its own:
    service/db/quote_insert_rows.py)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def add(self, tenant: str, key: str, *, holder: str, now: datetime) -> None:
        """Insert the claim (IntegrityError when the key is already claimed)."""
        values = {"tenant": tenant, "idempotency_key": key, "holder": holder, "claimed_at": now}
        self.connection.execute(_INSERT_CLAIM, values)

    def take_over(
        self, tenant: str, key: str, *, holder: str, now: datetime, stale_before: datetime
    ) -> bool:
        """Re-claim `key` for `holder` if its claim is `holder`'s own or older than
        `stale_before`; whether it was taken."""
        parameters = {"of": tenant, "on": key, "by": holder, "stale": stale_before, "now": now}
        result = self.connection.execute(_TAKE_OVER_CLAIM, parameters)
        return result.rowcount == 1

    def release(self, tenant: str, key: str, holder: str) -> None:
        """Delete `holder`'s claim on (`tenant`, `key`), if it is still there."""
        self.connection.execute(_RELEASE_CLAIM, {"tenant": tenant, "key": key, "by": holder})


class ObservationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, observation: Observation) -> Observation:
        self.session.add(observation)
        self.session.flush()
        return observation

    def by_idempotency_key(self, tenant: str, key: str) -> Observation | None:
        statement = select(Observation).where(
            Observation.tenant == tenant, Observation.idempotency_key == key
        )
        return self.session.scalars(statement).one_or_none()

    def with_quotes(self, tenant: str | None) -> list[tuple[Observation, Quote]]:
        """Observations with their quotes, of `tenant` (None: of every tenant), oldest first."""
        statement = select(Observation, Quote).join(Quote, Observation.quote_id == Quote.id)
        if tenant is not None:
            statement = statement.where(Observation.tenant == tenant, Quote.tenant == tenant)
        statement = statement.order_by(Observation.measured_at, Observation.id)
        return [(row[0], row[1]) for row in self.session.execute(statement)]

    def for_quote(self, quote_id: str) -> list[Observation]:
        statement = (
            select(Observation)
            .where(Observation.quote_id == quote_id)
            .order_by(Observation.created_at, Observation.id)
        )
        return list(self.session.scalars(statement))


class ApiKeyRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, key: ApiKey) -> ApiKey:
        self.session.add(key)
        self.session.flush()
        return key

    def by_prefix(self, prefix: str) -> ApiKey | None:
        return self.session.scalars(select(ApiKey).where(ApiKey.prefix == prefix)).one_or_none()

    def all(self) -> list[ApiKey]:
        return list(self.session.scalars(select(ApiKey).order_by(ApiKey.created_at, ApiKey.id)))

    def count(self) -> int:
        """All keys ever created, revoked ones included (any key closes the open dev mode)."""
        return int(self.session.scalar(select(func.count()).select_from(ApiKey)) or 0)


class CalibrationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, calibration: Calibration) -> Calibration:
        self.session.add(calibration)
        self.session.flush()
        return calibration

    def visible(self, tenant: str, calibration_id: str) -> Calibration | None:
        """A calibration `tenant` may see: its own or a global one (others are not found)."""
        statement = select(Calibration).where(
            Calibration.id == calibration_id,
            or_(Calibration.scope == GLOBAL_SCOPE, Calibration.tenant == tenant),
        )
        return self.session.scalars(statement).one_or_none()

    def list_visible(self, tenant: str, limit: int) -> list[Calibration]:
        """`tenant`'s and the global calibrations, newest first."""
        statement = (
            select(Calibration)
            .where(or_(Calibration.scope == GLOBAL_SCOPE, Calibration.tenant == tenant))
            .order_by(Calibration.created_at.desc(), Calibration.id.desc())
            .limit(limit)
        )
        return list(self.session.scalars(statement))

    def current_in_scope(self, scope: str, tenant: str) -> Calibration | None:
        """The current calibration of one scope: `tenant`'s own, or the global one."""
        statement = select(Calibration).where(
            Calibration.is_current.is_(True), Calibration.scope == scope
        )
        if scope != GLOBAL_SCOPE:
            statement = statement.where(Calibration.tenant == tenant)
        order = (Calibration.activated_at.desc(), Calibration.id.desc())
        return self.session.scalars(statement.order_by(*order)).first()

    def current_for(self, tenant: str) -> Calibration | None:
        """The calibration that prices `tenant`'s quotes: its own current one, else the
        current global one."""
        return self.current_in_scope(TENANT_SCOPE, tenant) or self.current_in_scope(
            GLOBAL_SCOPE, tenant
        )

    def all_current(self) -> list[Calibration]:
        """Every scope's current calibration (a handful of rows)."""
        statement = select(Calibration).where(Calibration.is_current.is_(True))
        return list(self.session.scalars(statement.order_by(Calibration.activated_at)))

    def deactivate_scope(self, scope: str, tenant: str) -> None:
        statement = update(Calibration).where(
            Calibration.is_current.is_(True), Calibration.scope == scope
        )
        if scope != GLOBAL_SCOPE:
            statement = statement.where(Calibration.tenant == tenant)
        self.session.execute(statement.values(is_current=False))
