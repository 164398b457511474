"""Each endpoint as a `Call`: the HTTP request to send and how to read its answer. The sync and
async clients send the same calls, so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from llm_energy_quotes_client.errors import ApiProblem, problem_from_body
from llm_energy_quotes_client.models import (
    Calibration,
    CalibrationList,
    CsvPage,
    Estimate,
    Gpu,
    GpuList,
    Health,
    Model,
    ModelList,
    Observation,
    QuoteDetail,
    QuotePage,
    RegionList,
    Rollback,
)
from llm_energy_quotes_client.requests import (
    CalibrationRequest,
    EstimateRequest,
    ObservationRequest,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

When = datetime | str
"""A time bound: an aware datetime, or an RFC 3339 string sent as given."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and the reading of its success answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, str | int] | None = None
    json: Any = None
    headers: Mapping[str, str] | None = None


def _document(model: type[M]) -> Callable[[httpx.Response], M]:
    def read(response: httpx.Response) -> M:
        return model.model_validate_json(response.content)

    return read


def _when(value: When) -> str:
    return value.isoformat() if isinstance(value, datetime) else value


def _segment(value: str, *, safe: str = "") -> str:
    return quote(value, safe=safe)


def estimate(
    body: EstimateRequest | Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
    verbose: bool = False,
) -> Call[Estimate]:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else None
    params = {"verbose": "true"} if verbose else None
    return Call("POST", "/v1/estimate", _document(Estimate), params, body, headers)


def _batch_items(response: httpx.Response) -> list[Estimate | ApiProblem]:
    items: list[Estimate | ApiProblem] = []
    for item in response.json()["items"]:
        if "energy" in item:
            items.append(Estimate.model_validate(item))
        else:
            items.append(problem_from_body(int(item.get("status", 422)), item))
    return items


def estimate_batch(
    items: Sequence[EstimateRequest | Mapping[str, Any]], *, verbose: bool = False
) -> Call[list[Estimate | ApiProblem]]:
    params = {"verbose": "true"} if verbose else None
    return Call("POST", "/v1/estimate/batch", _batch_items, params, {"items": list(items)})


def _page_params(
    created_after: When | None,
    created_before: When | None,
    limit: int | None,
    cursor: str | None,
) -> dict[str, str | int]:
    params: dict[str, str | int] = {}
    if created_after is not None:
        params["created_after"] = _when(created_after)
    if created_before is not None:
        params["created_before"] = _when(created_before)
    if limit is not None:
        params["limit"] = limit
    if cursor is not None:
        params["cursor"] = cursor
    return params


def quote_page(
    created_after: When | None = None,
    created_before: When | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[QuotePage]:
    params = _page_params(created_after, created_before, limit, cursor)
    return Call("GET", "/v1/quotes", _document(QuotePage), params)


def _csv_page(response: httpx.Response) -> CsvPage:
    return CsvPage(
        text=response.text,
        next_cursor=response.headers.get("X-Next-Cursor"),
        resume_cursor=response.headers.get("X-Resume-Cursor"),
    )


def quote_csv_page(
    created_after: When | None = None,
    created_before: When | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[CsvPage]:
    params = {**_page_params(created_after, created_before, limit, cursor), "format": "csv"}
    return Call("GET", "/v1/quotes", _csv_page, params)


def quote_detail(quote_id: str) -> Call[QuoteDetail]:
    return Call("GET", f"/v1/quotes/{_segment(quote_id)}", _document(QuoteDetail))


def post_observation(
    quote_id: str,
    body: ObservationRequest | Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
) -> Call[Observation]:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else None
    path = f"/v1/quotes/{_segment(quote_id)}/observations"
    return Call("POST", path, _document(Observation), None, body, headers)


def fit_calibration(body: CalibrationRequest | None = None) -> Call[Calibration]:
    return Call("POST", "/v1/calibrations", _document(Calibration), None, body or {})


def current_calibration() -> Call[Calibration]:
    return Call("GET", "/v1/calibrations/current", _document(Calibration))


def calibrations(limit: int | None = None) -> Call[CalibrationList]:
    params = {"limit": limit} if limit is not None else None
    return Call("GET", "/v1/calibrations", _document(CalibrationList), params)


def calibration(calibration_id: str) -> Call[Calibration]:
    path = f"/v1/calibrations/{_segment(calibration_id)}"
    return Call("GET", path, _document(Calibration))


def activate_calibration(calibration_id: str) -> Call[Calibration]:
    path = f"/v1/calibrations/{_segment(calibration_id)}/activate"
    return Call("POST", path, _document(Calibration))


def rollback_calibration(scope: Literal["tenant", "global"] = "tenant") -> Call[Rollback]:
    return Call("POST", "/v1/calibrations/rollback", _document(Rollback), None, {"scope": scope})


def gpus() -> Call[GpuList]:
    return Call("GET", "/v1/gpus", _document(GpuList))


def gpu(gpu_id: str) -> Call[Gpu]:
    return Call("GET", f"/v1/gpus/{_segment(gpu_id)}", _document(Gpu))


def models() -> Call[ModelList]:
    return Call("GET", "/v1/models", _document(ModelList))


def model(model_id: str) -> Call[Model]:
    # A Hugging Face repo id keeps its slash: the route takes the rest of the path.
    return Call("GET", f"/v1/models/{_segment(model_id, safe='/')}", _document(Model))


def regions() -> Call[RegionList]:
    return Call("GET", "/v1/regions", _document(RegionList))


def health() -> Call[Health]:
    return Call("GET", "/v1/health", _document(Health))
