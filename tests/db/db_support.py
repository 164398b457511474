"""Helpers of the database tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Engine, func, insert, select, text
from sqlalchemy.orm import Session

from service.db.ids import new_quote_id
from service.db.quote_document import CarbonFactorSet, QuoteDocument
from service.db.repositories import stored_response
from service.db.tables import IdempotencyClaim, NewQuote, Quote, QuoteRow, StoredFactorSet

STAMPED = object()  # `created_at` default: now, as the quote service stamps a priced quote
STAMP = datetime(2026, 11, 25, 6, 30, 15, 123456, tzinfo=UTC)
PLACEHOLDER = datetime(2000, 1, 1, tzinfo=UTC)  # overwritten by the stamp
SET_A = CarbonFactorSet.of('{"grid":{"value":250.0,"source":"a"}}')
SET_B = CarbonFactorSet.of('{"grid":{"value":480.5,"source":"b"}}')


def _columns(
    quote_id: str, tenant: str, key: str | None, response: object, created_at: datetime | None
) -> dict[str, Any]:
    return {
        "id": quote_id,
        "tenant": tenant,
        "idempotency_key": key,
        "request_hash": "h",
        "request": {},
        "response": response,
        "model_version": "roofline test",
        "calibration_id": None,
        "model_id": "custom",
        "gpu_id": "L4",
        "gpu_count": 1,
        "created_at": created_at,
    }


def quote(
    tenant: str = "acme", key: str | None = None, created_at: datetime | object | None = STAMPED
) -> Quote:
    """A minimal quote row; `created_at=None` leaves the stamping to the store."""
    stamp = datetime.now(UTC) if created_at is STAMPED else created_at
    assert stamp is None or isinstance(stamp, datetime)
    return Quote(**_columns(new_quote_id(), tenant, key, {"energy": {"gpu_j": 1.0}}, stamp))


def quote_row(
    quote_id: str, response: QuoteDocument | dict[str, Any], created_at: datetime
) -> QuoteRow:
    """A minimal new quote as the quote service inserts it (not an ORM instance)."""
    return QuoteRow(**_columns(quote_id, "acme", None, response, created_at))


def document(gpu_j: float, factors: CarbonFactorSet) -> QuoteDocument:
    members = f'{{"energy":{{"gpu_j":{gpu_j}}},"carbon":{{"pue":1.2,"factors":null}}}}'
    return QuoteDocument.written(members, PLACEHOLDER, factors)


def mixed_group() -> list[NewQuote]:
    """Two quotes sharing a factor set, one with another set and an idempotency key, and an
    ORM quote with a plain dict document (no set): ids q-1 to q-4."""
    keyed = quote_row("q-3", document(3.0, SET_B), PLACEHOLDER)
    keyed.idempotency_key = "retry-1"
    plain = quote(key=None, created_at=None)
    plain.id = "q-4"
    return [
        quote_row("q-1", document(1.5, SET_A), PLACEHOLDER),
        quote_row("q-2", document(2.25, SET_A), PLACEHOLDER),
        keyed,
        plain,
    ]


def stamp_with(quotes: list[NewQuote]) -> datetime:
    """Stamp `quotes` with STAMP, as the store stamps them with the time."""
    for new in quotes:
        new.created_at = STAMP
    return STAMP


def empty(engine: Engine) -> None:
    """Delete every quote, carbon factor set and idempotency claim, and dispose of `engine`."""
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM quotes"))
        connection.execute(text("DELETE FROM carbon_factor_sets"))
        connection.execute(text("DELETE FROM idempotency_claims"))
    engine.dispose()


# Claims beside mixed_group's keyed quote: its own ("acme", "retry-1"), another key of its
# tenant, and its key in another tenant.
CLAIMS_AROUND_THE_KEYED_QUOTE = [("acme", "retry-1"), ("acme", "retry-2"), ("other", "retry-1")]


def add_claims(engine: Engine, claims: list[tuple[str, str]]) -> None:
    """Claim each (tenant, key) of `claims` for holder "h" (as QuoteStore.claim does)."""
    with engine.begin() as connection:
        connection.execute(
            insert(IdempotencyClaim),
            [
                {"tenant": t, "idempotency_key": k, "holder": "h", "claimed_at": STAMP}
                for t, k in claims
            ],
        )


def claims_left(engine: Engine) -> list[tuple[str, str]]:
    """The (tenant, key) of every idempotency claim, sorted."""
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT tenant, idempotency_key FROM idempotency_claims"))
        return sorted((row[0], row[1]) for row in rows)


def assert_read_back(engine: Engine, written: list[NewQuote]) -> None:
    """The quotes `written` (stamped STAMP, mixed_group's) read back through the ORM, as the
    billing routes read them: every column, the documents whole with their factor sets put
    back, and each factor set stored once."""
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Quote)) == len(written)
        for new in written:
            stored = session.get(Quote, new.id)
            assert stored is not None
            for column in ("tenant", "idempotency_key", "request_hash", "request"):
                assert getattr(stored, column) == getattr(new, column), column
            for column in ("model_version", "calibration_id", "model_id", "gpu_id", "gpu_count"):
                assert getattr(stored, column) == getattr(new, column), column
            assert stored.created_at == STAMP
            expected = (
                new.response.as_dict() if isinstance(new.response, QuoteDocument) else new.response
            )
            assert stored_response(session, stored) == expected
        sets = session.scalars(select(StoredFactorSet).order_by(StoredFactorSet.id)).all()
        assert sorted(s.id for s in sets) == sorted([SET_A.id, SET_B.id])
        for stored_set in sets:
            factors = SET_A if stored_set.id == SET_A.id else SET_B
            assert stored_set.factors == orjson.loads(factors.json)
