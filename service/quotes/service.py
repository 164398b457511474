"""The one service call behind every estimate: price a list of requests off the event loop and
store their quotes through the backend's quote sink, answering each as its JSON document.

Single, batch, idempotent and verbose estimates all come here; a single request is a list of
one. Pricing is CPU-bound, so it runs on the pricing thread (service/quotes/pricing_thread.py),
which prices what waits together; storing is the quote sink's (service/quotes/quote_sink.py:
group commit per backend, spool when the database refuses).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.concurrency import run_in_threadpool

from service.catalog.registered import RegisteredArchitecture
from service.db.ids import new_quote_id
from service.db.quote_document import QuoteDocument
from service.db.quote_store import Claim, QuoteStore, StoredQuote
from service.db.store_outcomes import DuplicateIdempotencyKey, KeyClaimed, Saved, StoreFailed
from service.db.tables import QuoteRow
from service.errors import Conflict, IdempotencyMismatch, ServiceError
from service.metrics import Metrics
from service.pricing.priced import PricedRequest
from service.quotes.calibration_registry import CalibrationRegistry
from service.quotes.gpu_registry import gpus_named
from service.quotes.idempotency import InFlightGuard, fingerprint
from service.quotes.model_registry import Registered, registered_for
from service.quotes.pricing_thread import PricingThread
from service.quotes.quote_sink import QuoteSink
from service.quotes.shared_read import SharedRead
from service.schemas.estimate_request import EstimateRequest
from service.schemas.estimate_response import EstimateResponse

NOT_STORED_WARNING = (
    "the quote could not be stored (database unavailable): quote_id is null; "
    "the estimate itself is complete"
)

SPOOLED_WARNING = (
    "the database is unavailable: the quote was spooled durably and will appear in "
    "GET /v1/quotes once replayed"
)

JsonParts = tuple[bytes, ...]
"""A JSON document as UTF-8 byte strings to be written one after the other (a quote's carbon
factors are the bytes its factor set holds, shared, not copied into each answer)."""

Answer = JsonParts | ServiceError
"""A request's answer: its quote's JSON document, or its error."""


@dataclass(frozen=True, slots=True)
class _Priced:
    request: EstimateRequest
    estimate: PricedRequest
    # The fingerprint an Idempotency-Key is stored with; None without a key (nothing compares it).
    request_hash: str | None = None


@dataclass(slots=True)
class QuoteTimings:
    """Where one `quote` call spent its time [s] (the Server-Timing header reports it)."""

    pricing_s: float = 0.0
    storing_s: float = 0.0

    def server_timing(self) -> str:
        """The Server-Timing header's value, durations in ms."""
        return f"pricing;dur={self.pricing_s * 1e3:.2f}, storing;dur={self.storing_s * 1e3:.2f}"


# Request fields added since quotes were first stored, with their defaults. At the default they
# are left out of the stored request and its fingerprint: the request means what it meant before
# they existed, and an Idempotency-Key stored then still replays its quote.
# A parent is a dotted path ("hardware.parallelism").
ADDED_FIELD_DEFAULTS = (
    ("workload", "cached_prompt_tokens", 0),
    ("serving", "concurrent_sequences", None),
    ("hardware", "spec", None),
    ("serving", "engine_version", None),
    ("hardware.parallelism", "data", None),
    ("serving", "disaggregated", None),
)


_ADDED_FIELD_PATHS = tuple(
    (tuple(parent.split(".")), name, default) for parent, name, default in ADDED_FIELD_DEFAULTS
)
# Without nulls (the stored request), a field whose default is null is gone already.
_ADDED_FIELD_PATHS_NOT_NULL = tuple(path for path in _ADDED_FIELD_PATHS if path[2] is not None)

INLINE_GPU_LABEL = "hardware.spec"
"""The metrics' GPU label of quotes on a GPU described inline (its id is the caller's)."""


def request_json(request: EstimateRequest, *, exclude_none: bool = False) -> dict[str, Any]:
    """The request as JSON-ready data, without the added fields left at their defaults."""
    data = request.model_dump(mode="json", exclude_none=exclude_none)
    for parent, name, default in (
        _ADDED_FIELD_PATHS_NOT_NULL if exclude_none else _ADDED_FIELD_PATHS
    ):
        part: Any = data
        for key in parent:
            part = part.get(key) if isinstance(part, dict) else None
        if isinstance(part, dict) and name in part and part[name] == default:
            del part[name]
    return data


def request_fingerprint(request: EstimateRequest, verbose: bool) -> str:
    """The fingerprint an Idempotency-Key's request is stored and compared with."""
    return fingerprint({"request": request_json(request), "verbose": verbose})


class QuoteService:
    """Prices and stores estimates (see the module doc)."""

    def __init__(
        self,
        pricer: PricingThread,
        store: QuoteStore,
        sink: QuoteSink,
        guard: InFlightGuard,
        metrics: Metrics,
        calibrations: CalibrationRegistry | None = None,
    ) -> None:
        self.pricer = pricer
        self.store = store
        self.sink = sink
        self.guard = guard
        self.metrics = metrics
        self.calibrations = calibrations
        # One calibration read at a time when they are due, shared by the requests that find
        # them due meanwhile.
        self._calibration_read: SharedRead[None] | None = None
        if calibrations is not None:
            self._calibration_read = SharedRead(
                calibrations.refresh, calibrations.refresh_s, lambda: calibrations.generation
            )
        self._in_progress = 0  # requests of this process inside `quote` (priced, stored or waiting)

    async def quote(
        self,
        items: Sequence[EstimateRequest | ServiceError],
        *,
        tenant: str,
        verbose: bool = False,
        idempotency_key: str | None = None,
        timings: QuoteTimings | None = None,
    ) -> list[Answer]:
        """Each item's answer, in order: its stored quote's JSON, or its error (an item that
        failed validation comes in as its error and goes out as it is).

        With `idempotency_key` (one item only), a repeated key answers the quote first stored
        under it, and a key in flight elsewhere answers 409. `timings`, when given, is filled
        with the time spent pricing and storing."""
        timings = timings if timings is not None else QuoteTimings()
        self._in_progress += 1
        try:
            calibrations, read = self.calibrations, self._calibration_read
            if calibrations is not None and read is not None and not calibrations.fresh():
                await read()
            if idempotency_key is None:
                return await self._quote(items, tenant, verbose, timings)
            (item,) = items
            if isinstance(item, ServiceError):
                return [item]
            return [await self._quote_once(item, tenant, idempotency_key, verbose, timings)]
        finally:
            self._in_progress -= 1

    async def _quote(
        self,
        items: Sequence[EstimateRequest | ServiceError],
        tenant: str,
        verbose: bool,
        timings: QuoteTimings,
    ) -> list[Answer]:
        priced = await self._price(items, tenant, verbose, timings)
        to_store = [p for p in priced if isinstance(p, _Priced)]
        stored = iter((await self._store(to_store, tenant, timings))[0])
        return [next(stored) if isinstance(p, _Priced) else p for p in priced]

    async def _quote_once(
        self, request: EstimateRequest, tenant: str, key: str, verbose: bool, timings: QuoteTimings
    ) -> Answer:
        """The idempotent estimate: looked up, claimed (a new key in or from the loop where the
        sink can, else on a thread), priced, stored (the transaction that stores the quote deletes
        the claim), or released when it was not stored."""
        request_hash = request_fingerprint(request, verbose)
        with self.guard.hold(tenant, key):  # in this process
            existing: StoredQuote | None = None
            claim = await self.sink.claim_in_loop(tenant, key)
            if claim is None:
                existing, claim = await run_in_threadpool(self._look_up_and_claim, tenant, key)
            if existing is not None:
                return _replay(existing, request_hash)
            committed = False
            try:
                (priced,) = await self._price([request], tenant, verbose, timings)
                if isinstance(priced, ServiceError):
                    return priced
                priced = _Priced(request, priced.estimate, request_hash)
                try:
                    answers, committed = await self._store([priced], tenant, timings, key)
                    return answers[0]
                except DuplicateIdempotencyKey:
                    return await run_in_threadpool(self._replay_winner, priced, tenant, key)
            finally:
                if claim is not None and not committed:
                    await run_in_threadpool(self.store.release, claim)

    async def _price(
        self,
        items: Sequence[EstimateRequest | ServiceError],
        tenant: str,
        verbose: bool,
        timings: QuoteTimings,
    ) -> list[_Priced | ServiceError]:
        """Every valid item priced on the pricing thread, with `tenant`'s current calibration
        (its own, else the global one); counted in the metrics by tenant, model and GPU."""
        calibration = self.calibrations.for_tenant(tenant) if self.calibrations else None
        paired = await self._with_registered(items, tenant)
        requests = [item[0] for item in paired if isinstance(item, tuple)]
        registered = [item[1] for item in paired if isinstance(item, tuple)]
        started = time.perf_counter()
        answers = iter(
            await self.pricer.price(
                requests, verbose=verbose, calibration=calibration, registered=registered
            )
            if requests
            else []
        )
        timings.pricing_s = time.perf_counter() - started
        self.metrics.pricing_s.observe(timings.pricing_s)
        results: list[_Priced | ServiceError] = []
        # (model, gpu) -> [requests, GPU energy J, CO2e g]
        totals: defaultdict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
        for item in paired:
            answer = item if isinstance(item, ServiceError) else next(answers)
            if isinstance(answer, ServiceError):
                self.metrics.count_refused(tenant, answer.type_slug)
                results.append(answer)
                continue
            assert isinstance(item, tuple)
            # a GPU described inline is named by its caller: one label for all (bounded series)
            gpu_label = INLINE_GPU_LABEL if item[0].hardware.spec is not None else answer.gpu_id
            total = totals[answer.model_id, gpu_label]
            total[0] += 1
            total[1] += answer.gpu_j
            total[2] += answer.total_g
            results.append(_Priced(item[0], answer))
        for (model, gpu), (count, gpu_j, co2e_g) in totals.items():
            self.metrics.count_quotes(tenant, model, gpu, int(count), gpu_j, co2e_g)
        priced = [p.estimate for p in results if isinstance(p, _Priced)]
        if priced:  # one calibration per call: the tenant's current one
            self.metrics.count_calibrated(tenant, priced[0].calibration_id, len(priced))
        return results

    async def _with_registered(
        self, items: Sequence[EstimateRequest | ServiceError], tenant: str
    ) -> list[tuple[EstimateRequest, RegisteredArchitecture | None] | ServiceError]:
        """Each valid item with the tenant's registered model it names (read from the
        database only for names the catalogue lacks), or the error that lookup answered."""
        items = await self._with_registered_gpus(items)
        requests = [item for item in items if not isinstance(item, ServiceError)]
        models = self.pricer.estimator.models
        lookup: list[Registered] = [None] * len(requests)
        if any(r.model is not None and not models.has(r.model) for r in requests):
            lookup = await run_in_threadpool(
                registered_for, self.store.database, models, tenant, requests
            )
        found = iter(zip(requests, lookup, strict=True))
        paired: list[tuple[EstimateRequest, RegisteredArchitecture | None] | ServiceError] = []
        for item in items:
            if isinstance(item, ServiceError):
                paired.append(item)
                continue
            request, registered = next(found)
            paired.append(
                registered if isinstance(registered, ServiceError) else (request, registered)
            )
        return paired

    async def _with_registered_gpus(
        self, items: Sequence[EstimateRequest | ServiceError]
    ) -> Sequence[EstimateRequest | ServiceError]:
        """The items, once the GPUs registered under names the catalogue lacks are known to the
        estimator (read from the database only for such names); with the database away, a
        request naming one of them gets its 503."""
        estimator = self.pricer.estimator
        names = {
            item.hardware.gpu
            for item in items
            if not isinstance(item, ServiceError)
            and item.hardware.gpu is not None
            and not estimator.gpus.has(item.hardware.gpu)
        }
        if not names:
            return items
        found = await run_in_threadpool(gpus_named, self.store.database, estimator.gpus, names)
        if not isinstance(found, ServiceError):
            estimator.learn_gpus(found)
            return items
        return [
            found if not isinstance(item, ServiceError) and item.hardware.gpu in names else item
            for item in items
        ]

    async def _store(
        self,
        priced: Sequence[_Priced],
        tenant: str,
        timings: QuoteTimings,
        idempotency_key: str | None = None,
    ) -> tuple[list[JsonParts], bool]:
        """The JSON answers with their quote ids once committed (or spooled); without, plus a
        warning, if not; and whether they were committed. Raises DuplicateIdempotencyKey."""
        if not priced:
            return [], False
        rows = [_quote_row(p, new_quote_id(), tenant, idempotency_key) for p in priced]
        started = time.perf_counter()
        try:
            saved = await self.sink.save(rows, commit_now=self._in_progress == 1)
        except StoreFailed:
            self._stored(tenant, "not_stored", len(rows), started, timings)
            self.metrics.db_errors.labels(operation="store_quote").inc()
            return [_warned_json(p.estimate.document, NOT_STORED_WARNING) for p in priced], False
        if saved is Saved.SPOOLED:  # each row's document has its quote id and created_at
            self._stored(tenant, "spooled", len(rows), started, timings)
            self.metrics.db_errors.labels(operation="store_quote").inc()
            return [_warned_json(_document(row), SPOOLED_WARNING) for row in rows], False
        self._stored(tenant, "stored", len(rows), started, timings)
        return [_document(row).json_parts() for row in rows], True

    def _stored(
        self, tenant: str, outcome: str, count: int, started: float, timings: QuoteTimings
    ) -> None:
        timings.storing_s = time.perf_counter() - started
        self.metrics.storing_s.observe(timings.storing_s)
        self.metrics.count_stored(tenant, outcome, count)

    def _look_up_and_claim(self, tenant: str, key: str) -> tuple[StoredQuote | None, Claim | None]:
        """The quote stored under `key`, else this process's claim on it (None while the
        database is away: the in-process guard holds alone); Conflict (409) while another
        process prices under it."""
        try:
            existing = self.store.by_idempotency_key(tenant, key)
        except StoreFailed:
            self.metrics.db_errors.labels(operation="idempotency_lookup").inc()
            return None, None
        if existing is not None:
            return existing, None
        try:
            return None, self.store.claim(tenant, key)
        except KeyClaimed:
            raise Conflict(
                "a request with this Idempotency-Key is still in flight; retry later",
                headers={"Retry-After": "1"},
            ) from None
        except StoreFailed:
            self.metrics.db_errors.labels(operation="idempotency_claim").inc()
            return None, None

    def _replay_winner(self, priced: _Priced, tenant: str, key: str) -> JsonParts:
        """Another request stored this key first: answer with its quote."""
        try:
            stored = self.store.by_idempotency_key(tenant, key)
        except StoreFailed:
            stored = None
        if stored is None:
            return _warned_json(priced.estimate.document, NOT_STORED_WARNING)
        return _replay(stored, priced.request_hash)


def _warned_json(document: QuoteDocument, warning: str) -> JsonParts:
    """The whole `document` with `warning` added, as the JSON answer (a rare path: parsed and
    written again by the response model)."""
    response = EstimateResponse.model_validate_json(document.text())
    warned = response.model_copy(update={"warnings": [*response.warnings, warning]})
    return (warned.model_dump_json().encode(),)


def _quote_row(
    priced: _Priced, quote_id: str, tenant: str, idempotency_key: str | None
) -> QuoteRow:
    """The row of `priced` stored as quote `quote_id` (its response document says so; its
    `created_at` is stamped when the row is committed)."""
    quote = priced.estimate
    document = quote.document.with_id(quote_id)
    return QuoteRow(
        id=quote_id,
        tenant=tenant,
        idempotency_key=idempotency_key,
        request_hash=priced.request_hash,
        request=request_json(priced.request, exclude_none=True),
        response=document,
        model_version=quote.model_version,
        calibration_id=quote.calibration_id,
        model_id=quote.model_id,
        gpu_id=quote.gpu_id,
        gpu_count=quote.gpu_count,
        created_at=quote.priced_at,
    )


def _document(row: QuoteRow) -> QuoteDocument:
    assert isinstance(row.response, QuoteDocument)  # as _quote_row builds it
    return row.response


def _replay(existing: StoredQuote, request_hash: str | None) -> JsonParts:
    if existing.request_hash != request_hash:
        raise IdempotencyMismatch(
            "this Idempotency-Key was already used with a different request body; "
            "use a new key for a new request"
        )
    return (EstimateResponse.model_validate(existing.response).model_dump_json().encode(),)
