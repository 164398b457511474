"""The billing pull: keyset pagination over (created_at, id), as JSON or CSV."""

from __future__ import annotations

import base64
import csv
import io
import json
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from service.db.repositories import ObservationRepository, QuoteRepository, stored_response
from service.db.tables import Observation, Quote
from service.errors import FieldError, InvalidRequest, NotFound
from service.schemas.common import storable_text, utc_representable
from service.schemas.quotes import ObservationOut, QuoteDetail, QuotePage, QuoteSummary

CSV_COLUMNS = list(QuoteSummary.model_fields)


def encode_cursor(quote: Quote) -> str:
    raw = json.dumps([quote.created_at.isoformat(), quote.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, quote_id = json.loads(raw)
        at = utc_representable(datetime.fromisoformat(stamp))
        if at.tzinfo is None or not isinstance(quote_id, str):
            raise ValueError(cursor)
        storable_text(quote_id)
    except (ValueError, TypeError) as error:
        raise InvalidRequest(
            "cursor is not one this service issued",
            errors=[FieldError("query.cursor", "invalid cursor")],
        ) from error
    return at, quote_id


def quote_page(
    session: Session,
    tenant: str,
    *,
    cursor: str | None,
    created_after: datetime | None,
    created_before: datetime | None,
    settled_before: datetime | None = None,
    limit: int,
) -> QuotePage:
    """The next `limit` quotes of `tenant`, oldest first, strictly after `cursor`.

    Only quotes created at or before `settled_before` are listed: a quote commits within one
    statement timeout of its `created_at`, so with `settled_before` = now - settle window no
    quote can still commit behind the rows returned, and following `next_cursor` (and later
    `resume_cursor`) neither skips nor repeats a row, however many are inserted meanwhile.
    """
    after = decode_cursor(cursor) if cursor else None
    rows = QuoteRepository(session).page(
        tenant,
        after=after,
        created_after=created_after,
        created_before=created_before,
        settled_before=settled_before,
        limit=limit + 1,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = encode_cursor(rows[-1]) if more else None
    resume_cursor = encode_cursor(rows[-1]) if rows else cursor
    return QuotePage(
        items=[quote_summary(row) for row in rows],
        next_cursor=next_cursor,
        resume_cursor=resume_cursor,
    )


# The carbon document's members copied into a billing row as they are.
_CARBON_COLUMNS = (
    "operational_g",
    "operational_g_low",
    "operational_g_high",
    "embodied_g",
    "embodied_g_low",
    "embodied_g_high",
    "water_l",
    "water_l_low",
    "water_l_high",
)


def quote_summary(quote: Quote) -> QuoteSummary:
    response: dict[str, Any] = quote.response
    energy, carbon = response["energy"], response["carbon"]
    return QuoteSummary(
        quote_id=quote.id,
        created_at=quote.created_at,
        model=quote.model_id,
        gpu=quote.gpu_id,
        gpu_count=quote.gpu_count,
        model_version=quote.model_version,
        calibration_id=quote.calibration_id,
        gpu_j=energy["gpu_j"],
        gpu_j_low=energy.get("gpu_j_low"),
        gpu_j_high=energy.get("gpu_j_high"),
        facility_j=energy["facility_j"],
        total_s=response["latency"]["total_s"],
        total_g=carbon["total_g"],
        total_g_low=carbon.get("total_g_low"),
        total_g_high=carbon.get("total_g_high"),
        **{name: carbon.get(name) for name in _CARBON_COLUMNS},
        metadata=quote.request.get("metadata"),
    )


def quote_detail(session: Session, tenant: str, quote_id: str) -> QuoteDetail:
    """The tenant's quote with its observations; NotFound for unknown or other tenants' ids."""
    quote = QuoteRepository(session).get(tenant, quote_id)
    if quote is None:
        raise NotFound(f"no quote {quote_id!r}")
    observations = ObservationRepository(session).for_quote(quote.id)
    return QuoteDetail(
        quote_id=quote.id,
        created_at=quote.created_at,
        model=quote.model_id,
        gpu=quote.gpu_id,
        gpu_count=quote.gpu_count,
        model_version=quote.model_version,
        calibration_id=quote.calibration_id,
        request=quote.request,
        response=stored_response(session, quote),
        observations=[observation_out(o) for o in observations],
    )


def observation_out(observation: Observation) -> ObservationOut:
    return ObservationOut(
        observation_id=observation.id,
        quote_id=observation.quote_id,
        gpu_j=observation.gpu_j,
        total_s=observation.total_s,
        measured_with=observation.measured_with,
        measured_at=observation.measured_at,
        created_at=observation.created_at,
    )


def page_csv(page: QuotePage) -> str:
    """The page as CSV with a header row; metadata as a JSON cell."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for item in page.items:
        row = item.model_dump(mode="json")
        row["metadata"] = json.dumps(row["metadata"], sort_keys=True) if row["metadata"] else ""
        writer.writerow(row)
    return buffer.getvalue()


def page_jsonl(page: QuotePage) -> str:
    """The page as JSON Lines: one billing row (as in the JSON page's `items`) per line."""
    return "".join(item.model_dump_json() + "\n" for item in page.items)
