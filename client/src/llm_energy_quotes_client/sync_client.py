"""`QuotesClient`: the blocking client, on `httpx.Client`."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import httpx

from llm_energy_quotes_client import calls
from llm_energy_quotes_client.calls import Call, When
from llm_energy_quotes_client.errors import (
    ApiProblem,
    NotFound,
    QuotesTimeout,
    QuotesTransportError,
    problem_from_response,
)
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
    QuoteSummary,
    RegionList,
    Rollback,
)
from llm_energy_quotes_client.requests import (
    CalibrationRequest,
    EstimateRequest,
    ObservationRequest,
)
from llm_energy_quotes_client.retry_after import RetryPolicy
from llm_energy_quotes_client.transport import (
    DEFAULT_TIMEOUT_S,
    attempt_timeout,
    auth_headers,
    request_url,
)

T = TypeVar("T")


class QuotesClient:
    """The quoting service's API, blocking. Use as a context manager, or call `close()`.

    `base_url` is the service's root (`http://127.0.0.1:8000`); `api_key` is sent as a Bearer
    token. `timeout_s` bounds each attempt (default 10 s; with `http_client`, that client's own
    timeout unless given); `retry` bounds the retries of 429 and 503.
    `http_client` sends through an `httpx.Client` of the caller's (a proxy, a test transport):
    it is not closed here, and with no `base_url` its own base URL applies. Errors are
    raised as `ApiProblem` subclasses, transport failures as `QuotesTransportError`."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout_s: float | None = None,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        if base_url is None and http_client is None:
            raise ValueError("give base_url or http_client")
        self._base_url = base_url
        self._headers = auth_headers(api_key)
        self._timeout = attempt_timeout(timeout_s, own_client=http_client is None)
        self._retry = retry or RetryPolicy()
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=DEFAULT_TIMEOUT_S)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def send(self, call: Call[T]) -> T:
        """Send one call, retrying 429 and 503 as `retry` allows; its answer read, or raised."""
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method,
                    request_url(self._base_url, call.path),
                    params=call.params,
                    json=call.json,
                    headers={**self._headers, **(call.headers or {})},
                    timeout=self._timeout,
                )
            except httpx.TimeoutException as error:
                raise QuotesTimeout(f"{call.method} {call.path}: {error}") from error
            except httpx.TransportError as error:
                raise QuotesTransportError(f"{call.method} {call.path}: {error}") from error
            if response.status_code < 400:
                return call.read(response)
            wait_s = self._retry.wait_s(
                response.status_code, response.headers.get("Retry-After"), attempt
            )
            if wait_s is None:
                raise problem_from_response(response)
            time.sleep(wait_s)
            attempt += 1

    def estimate(
        self,
        body: EstimateRequest | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        verbose: bool = False,
    ) -> Estimate:
        """Quote one request (POST /v1/estimate); the same `idempotency_key` and body give
        the same quote back."""
        return self.send(calls.estimate(body, idempotency_key=idempotency_key, verbose=verbose))

    def estimate_batch(
        self, items: Sequence[EstimateRequest | Mapping[str, Any]], *, verbose: bool = False
    ) -> list[Estimate | ApiProblem]:
        """Quote up to 1000 requests at once; each answer, in order, is an `Estimate` or the
        item's problem (not raised: one bad item does not fail the others)."""
        return self.send(calls.estimate_batch(items, verbose=verbose))

    def quote_pages(
        self,
        *,
        created_after: When | None = None,
        created_before: When | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[QuotePage]:
        """The billing pull, page by page, following `next_cursor` to the end; start from
        the last page's `resume_cursor` next time to continue after it."""
        while True:
            page = self.send(calls.quote_page(created_after, created_before, limit, cursor))
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def quotes(
        self,
        *,
        created_after: When | None = None,
        created_before: When | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[QuoteSummary]:
        """Every quote of the billing pull, oldest first, fetched `limit` at a time."""
        pages = self.quote_pages(
            created_after=created_after, created_before=created_before, limit=limit, cursor=cursor
        )
        for page in pages:
            yield from page.items

    def quote_csv_pages(
        self,
        *,
        created_after: When | None = None,
        created_before: When | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[CsvPage]:
        """The billing pull as CSV (`format=csv`), page by page, each with its header row."""
        while True:
            page = self.send(calls.quote_csv_page(created_after, created_before, limit, cursor))
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def quote(self, quote_id: str) -> QuoteDetail:
        """One stored quote with its request, response and observations."""
        return self.send(calls.quote_detail(quote_id))

    def post_observation(
        self,
        quote_id: str,
        body: ObservationRequest | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Observation:
        """Store what was measured when the quoted request ran."""
        call = calls.post_observation(quote_id, body, idempotency_key=idempotency_key)
        return self.send(call)

    def fit_calibration(self, body: CalibrationRequest | None = None) -> Calibration:
        """Fit a calibration from the stored observations (scope admin)."""
        return self.send(calls.fit_calibration(body))

    def current_calibration(self) -> Calibration | None:
        """The calibration pricing the tenant's quotes; None while they are uncalibrated."""
        try:
            return self.send(calls.current_calibration())
        except NotFound:
            return None

    def calibrations(self, *, limit: int | None = None) -> CalibrationList:
        """The tenant's and the global calibrations, newest first."""
        return self.send(calls.calibrations(limit))

    def calibration(self, calibration_id: str) -> Calibration:
        """One of the tenant's calibrations, or a global one."""
        return self.send(calls.calibration(calibration_id))

    def activate_calibration(self, calibration_id: str) -> Calibration:
        """Make this calibration its scope's current one."""
        return self.send(calls.activate_calibration(calibration_id))

    def rollback_calibration(self, scope: Literal["tenant", "global"] = "tenant") -> Rollback:
        """Take the scope's current calibration out of service; the one it replaced is current
        again (409 `Conflict` when none is current)."""
        return self.send(calls.rollback_calibration(scope))

    def gpus(self) -> GpuList:
        return self.send(calls.gpus())

    def gpu(self, gpu_id: str) -> Gpu:
        return self.send(calls.gpu(gpu_id))

    def models(self) -> ModelList:
        return self.send(calls.models())

    def model(self, model_id: str) -> Model:
        return self.send(calls.model(model_id))

    def regions(self) -> RegionList:
        return self.send(calls.regions())

    def health(self) -> Health:
        return self.send(calls.health())
