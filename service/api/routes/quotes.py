"""Billing pull of stored quotes (scope: billing) and measured energy (scope: observe)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response

from service.api.deps import (
    BillingCaller,
    IdempotencyKeyHeader,
    ObserveCaller,
    ServicesDep,
    SessionDep,
)
from service.api.openapi import problem_responses
from service.db.base import utc_now
from service.quotes.billing import (
    observation_out,
    page_csv,
    page_jsonl,
    quote_detail,
    quote_page,
)
from service.quotes.observations import record_observation
from service.schemas.common import IsoDatetime
from service.schemas.quotes import ObservationIn, ObservationOut, QuoteDetail, QuotePage

router = APIRouter(prefix="/v1/quotes", tags=["quotes"])

# Ids are a prefix and a ULID: anything else (a NUL, which PostgreSQL refuses) is a 422.
QuoteId = Annotated[
    str,
    Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="A `quote_id`"),
]


@router.get(
    "",
    response_model=QuotePage,
    responses={
        **problem_responses(401, 403, 422, 503),
        200: {
            "content": {
                "text/csv": {"schema": {"type": "string"}},
                "application/x-ndjson": {"schema": {"type": "string"}},
            },
            "headers": {
                "X-Next-Cursor": {
                    "description": "`next_cursor` (format=csv or jsonl; absent at the end)"
                },
                "X-Resume-Cursor": {"description": "`resume_cursor` (format=csv or jsonl)"},
            },
        },
    },
)
def list_quotes(
    caller: BillingCaller,
    session: SessionDep,
    services: ServicesDep,
    created_after: IsoDatetime | None = None,
    created_before: IsoDatetime | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=500, pattern=r"^[A-Za-z0-9_-]+={0,2}$")] = None,
    format: Literal["json", "csv", "jsonl"] = "json",
) -> QuotePage | Response:
    """The tenant's quotes, oldest first, `created_after` inclusive and `created_before`
    exclusive; follow `next_cursor` (CSV and JSON Lines: the `X-Next-Cursor` header) until it
    is null, and start the next pull from `resume_cursor` (`X-Resume-Cursor`). A quote is
    listed once it is `QUOTES_BILLING_SETTLE_S` old, which keeps the pages stable under inserts."""
    settle_s = services.settings.billing_settle_s
    page = quote_page(
        session,
        caller.tenant,
        cursor=cursor,
        created_after=created_after,
        created_before=created_before,
        settled_before=utc_now() - timedelta(seconds=settle_s) if settle_s > 0 else None,
        limit=limit,
    )
    if format == "json":
        return page
    # CSV and JSON Lines hold the rows only: the cursors travel in headers.
    headers = {"X-Next-Cursor": page.next_cursor} if page.next_cursor else {}
    if page.resume_cursor:
        headers["X-Resume-Cursor"] = page.resume_cursor
    if format == "csv":
        return Response(page_csv(page), media_type="text/csv; charset=utf-8", headers=headers)
    return Response(page_jsonl(page), media_type="application/x-ndjson", headers=headers)


@router.get(
    "/{quote_id}", response_model=QuoteDetail, responses=problem_responses(401, 403, 404, 422, 503)
)
def get_quote(quote_id: QuoteId, caller: BillingCaller, session: SessionDep) -> QuoteDetail:
    """One of the tenant's quotes (another tenant's id answers 404)."""
    return quote_detail(session, caller.tenant, quote_id)


@router.post(
    "/{quote_id}/observations",
    response_model=ObservationOut,
    status_code=201,
    responses=problem_responses(401, 403, 404, 409, 413, 422, 503),
)
def post_observation(
    quote_id: QuoteId,
    body: ObservationIn,
    caller: ObserveCaller,
    session: SessionDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> ObservationOut:
    """Store what was measured for a quote; a repeated Idempotency-Key stores it once."""
    observation = record_observation(session, caller.tenant, quote_id, body, idempotency_key)
    return observation_out(observation)
