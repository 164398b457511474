"""Helpers of the database tests."""

from __future__ import annotations

from datetime import UTC, datetime

from service.db.models import Quote
from service.ids import new_quote_id

STAMPED = object()  # `created_at` default: now, as the quote service stamps a priced quote


def quote(
    tenant: str = "acme", key: str | None = None, created_at: datetime | object | None = STAMPED
) -> Quote:
    """A minimal quote row; `created_at=None` leaves the stamping to the store."""
    stamp = datetime.now(UTC) if created_at is STAMPED else created_at
    assert stamp is None or isinstance(stamp, datetime)
    return Quote(
        id=new_quote_id(),
        tenant=tenant,
        idempotency_key=key,
        request_hash="h",
        request={},
        response={"energy": {"gpu_j": 1.0}},
        model_version="roofline test",
        calibration_id=None,
        model_id="custom",
        gpu_id="L4",
        gpu_count=1,
        created_at=stamp,
    )
