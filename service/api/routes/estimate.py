"""POST /v1/estimate and POST /v1/estimate/batch (scope: estimate).

Both go through the one service call, `QuoteService.quote`, which prices off the event loop.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from service.api.deps import app_services, quote_service
from service.api.estimate_options import BATCH_OPTIONS, ESTIMATE_OPTIONS
from service.api.openapi import operation_id, problem_responses
from service.api.problems import problem_body, validation_problem
from service.config import MAX_BATCH_ITEMS
from service.errors import FieldError, InvalidRequest, ServiceError
from service.quotes.service import Answer, QuoteTimings
from service.schemas.common import PROBLEM_EXAMPLE, Problem, example
from service.schemas.estimate_request import EXAMPLE_REQUEST, EstimateRequest
from service.schemas.estimate_response import EstimateResponse

# Its routes join the app's own (service.main), so they name their operations as the app does.
router = APIRouter(
    prefix="/v1/estimate", tags=["estimate"], generate_unique_id_function=operation_id
)

_request_adapter: TypeAdapter[EstimateRequest] = TypeAdapter(EstimateRequest)
_EXAMPLE_RESPONSE = EstimateResponse.model_json_schema()["examples"][0]


class BatchRequest(BaseModel):
    """Items are validated one by one: a bad item becomes a problem, the others are priced."""

    model_config = example({"items": [EXAMPLE_REQUEST]})

    items: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=MAX_BATCH_ITEMS)]


class BatchResponse(BaseModel):
    """One answer per item, in order: an estimate or, for a bad item, its problem."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_EXAMPLE_RESPONSE, PROBLEM_EXAMPLE]}]}
    )

    items: list[EstimateResponse | Problem]


@router.post(
    "",
    response_model=EstimateResponse,
    responses=problem_responses(401, 403, 409, 413, 422),
    openapi_extra=ESTIMATE_OPTIONS.openapi_extra,
)
async def estimate(body: EstimateRequest, request: Request) -> Response:
    """Quote one request's GPU energy, latency and CO2e before it runs."""
    caller = await ESTIMATE_OPTIONS.caller(request)  # scope `estimate`
    idempotency_key, verbose = ESTIMATE_OPTIONS.read(request)  # `Idempotency-Key`, `?verbose`
    timings = QuoteTimings()
    (answer,) = await quote_service(request).quote(
        [body],
        tenant=caller.tenant,
        verbose=verbose,
        idempotency_key=idempotency_key,
        timings=timings,
    )
    if isinstance(answer, ServiceError):
        raise answer
    # The stored document's own JSON: letting FastAPI re-validate it against response_model
    # (the same class) would cost more than pricing it.
    return Response(
        b"".join(answer), media_type="application/json", headers=_timing_header(timings)
    )


@router.post(
    "/batch",
    response_model=BatchResponse,
    responses=problem_responses(401, 403, 413, 422),
    openapi_extra=BATCH_OPTIONS.openapi_extra,
)
async def estimate_batch(body: BatchRequest, request: Request) -> Response:
    """Quote up to `max_batch_items` requests (`max_verbose_batch_items` with `verbose`);
    answers are in the same order."""
    caller = await BATCH_OPTIONS.caller(request)  # scope `estimate`
    _, verbose = BATCH_OPTIONS.read(request)  # `?verbose`
    services = app_services(request)
    settings = services.settings
    limit = settings.max_verbose_batch_items if verbose else settings.max_batch_items
    if len(body.items) > limit:
        what = "verbose batch" if verbose else "batch"
        raise InvalidRequest(
            f"at most {limit} items per {what}, got {len(body.items)}",
            errors=[FieldError("items", f"at most {limit} items")],
        )
    parsed = await run_in_threadpool(_parsed_items, body.items)
    timings = QuoteTimings()
    answers = await services.quotes.quote(
        parsed, tenant=caller.tenant, verbose=verbose, timings=timings
    )
    return Response(
        _batch_json(answers), media_type="application/json", headers=_timing_header(timings)
    )


def _timing_header(timings: QuoteTimings) -> dict[str, str]:
    """Server-Timing: where the answer's time went (pricing, storing), in ms, for browsers'
    and proxies' timing views."""
    return {"Server-Timing": timings.server_timing()}


def _batch_json(answers: list[Answer]) -> bytes:
    """The answers as BatchResponse would serialise them, joined here: FastAPI re-validating a
    thousand finished responses against the response model would cost more than pricing.

    One join of every item's parts: a 1000-item answer is megabytes, and each further copy of
    it (each item's document whole, a join of the items, then the object around them) is a
    fresh allocation whose pages the kernel must fault in and zero."""
    parts = [b'{"items":[']
    for answer in answers:
        if isinstance(answer, ServiceError):
            parts.append(Problem.model_validate(problem_body(answer)).model_dump_json().encode())
        else:
            parts += answer
        parts.append(b",")
    if answers:
        parts.pop()  # the last item's comma
    parts.append(b"]}")
    return b"".join(parts)


def _parsed_items(items: list[dict[str, Any]]) -> list[EstimateRequest | ServiceError]:
    """Each item validated alone: a bad one becomes its problem, the others are priced."""
    parsed: list[EstimateRequest | ServiceError] = []
    for item in items:
        try:
            parsed.append(_request_adapter.validate_python(item))
        except ValidationError as error:
            parsed.append(validation_problem(error))
    return parsed
