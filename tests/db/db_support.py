"""Helpers of the database tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from service.db.models import Quote, QuoteRow
from service.db.quote_document import QuoteDocument
from service.ids import new_quote_id

STAMPED = object()  # `created_at` default: now, as the quote service stamps a priced quote


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
