"""Billing pull of stored quotes (scope: billing) and measured energy (scope: observe)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from pydantic import AwareDatetime

from service.api.deps import BillingCaller, IdempotencyKeyHeader, ObserveCaller, SessionDep
from service.billing import observation_out, page_csv, quote_detail, quote_page
from service.observing import record_observation
from service.schemas.common import Problem
from service.schemas.quotes import ObservationIn, ObservationOut, QuoteDetail, QuotePage

router = APIRouter(prefix="/v1/quotes", tags=["quotes"])

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "content": {"application/problem+json": {}}}
    for code in (401, 403, 404, 422, 503)
}


@router.get(
    "",
    response_model=QuotePage,
    responses={**ERRORS, 200: {"content": {"text/csv": {}}}},
)
def list_quotes(
    caller: BillingCaller,
    session: SessionDep,
    created_after: AwareDatetime | None = None,
    created_before: AwareDatetime | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    format: Literal["json", "csv"] = "json",
) -> QuotePage | Response:
    """The tenant's quotes, oldest first, `created_after` inclusive and `created_before`
    exclusive; follow `next_cursor` (CSV: the `X-Next-Cursor` header) until it is null."""
    page = quote_page(
        session,
        caller.tenant,
        cursor=cursor,
        created_after=created_after,
        created_before=created_before,
        limit=limit,
    )
    if format == "csv":
        headers = {"X-Next-Cursor": page.next_cursor} if page.next_cursor else {}
        return Response(page_csv(page), media_type="text/csv; charset=utf-8", headers=headers)
    return page


@router.get("/{quote_id}", response_model=QuoteDetail, responses=ERRORS)
def get_quote(quote_id: str, caller: BillingCaller, session: SessionDep) -> QuoteDetail:
    """One of the tenant's quotes (another tenant's id answers 404)."""
    return quote_detail(session, caller.tenant, quote_id)


@router.post(
    "/{quote_id}/observations",
    response_model=ObservationOut,
    status_code=201,
    responses=ERRORS,
)
def post_observation(
    quote_id: str,
    body: ObservationIn,
    caller: ObserveCaller,
    session: SessionDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> ObservationOut:
    """Store what was measured for a quote; a repeated Idempotency-Key stores it once."""
    observation = record_observation(session, caller.tenant, quote_id, body, idempotency_key)
    return observation_out(observation)
