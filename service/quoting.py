"""Quoting: price a request with the estimator and store it as a quote (idempotently)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from service.auth import Principal
from service.batch_pricing import price_batch
from service.calibrating import CalibrationRegistry
from service.db.models import QuoteRow
from service.db.quote_document import QuoteDocument
from service.db.quote_store import (
    Claim,
    DuplicateIdempotencyKey,
    KeyClaimed,
    QuoteStore,
    Saved,
    StoredQuote,
    StoreFailed,
)
from service.db.quote_writer import QuoteWriter
from service.errors import Conflict, IdempotencyMismatch, ServiceError
from service.estimator import Estimator, PricedRequest
from service.idempotency import InFlightGuard, fingerprint
from service.ids import new_quote_id
from service.metrics import Metrics
from service.pricing_queue import PricingQueue
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


def _warned_json(document: QuoteDocument, warning: str) -> bytes:
    """The whole `document` with `warning` added, as the JSON answer (a rare path: parsed and
    written again by the response model)."""
    response = EstimateResponse.model_validate_json(document.text())
    warned = response.model_copy(update={"warnings": [*response.warnings, warning]})
    return warned.model_dump_json().encode()


@dataclass(frozen=True, slots=True)
class _Priced:
    request: EstimateRequest
    request_hash: str
    estimate: PricedRequest


def request_fingerprint(request: EstimateRequest, verbose: bool) -> str:
    return fingerprint({"request": request.model_dump(mode="json"), "verbose": verbose})


class QuoteService:
    def __init__(
        self,
        estimator: Estimator,
        store: QuoteStore,
        guard: InFlightGuard,
        metrics: Metrics,
        calibrations: CalibrationRegistry | None = None,
        writer: QuoteWriter | None = None,
        *,
        price_together: bool = True,
    ) -> None:
        self.estimator = estimator
        self.writer = writer
        self.store = store
        self.guard = guard
        self.metrics = metrics
        self.calibrations = calibrations
        self.pricing: PricingQueue[_Priced] | None = (
            PricingQueue(self._price_together) if price_together else None
        )

    def quote(
        self,
        request: EstimateRequest,
        *,
        principal: Principal,
        idempotency_key: str | None,
        verbose: bool,
    ) -> bytes:
        """Price and store one request, answering its quote as JSON; a repeated idempotency key
        answers the stored quote."""
        if idempotency_key is None:
            return self._store(
                [self._price(request, verbose, principal.tenant)], principal.tenant, None
            )[0]
        tenant = principal.tenant
        request_hash = request_fingerprint(request, verbose)
        with self.guard.hold(tenant, idempotency_key):  # in this process
            try:
                existing = self.store.by_idempotency_key(tenant, idempotency_key)
            except StoreFailed:
                self.metrics.db_errors.labels(operation="idempotency_lookup").inc()
                existing, database_away = None, True
            else:
                database_away = False
            if existing is not None:
                return _replay(existing, request_hash)
            claim = None if database_away else self._claim(tenant, idempotency_key)
            try:
                priced = self._price(request, verbose, tenant)
            except BaseException:
                if claim is not None:
                    self.store.release(claim)
                raise
            try:
                return self._store([priced], tenant, idempotency_key, claim)[0]
            except DuplicateIdempotencyKey:
                return self._replay_winner(priced, tenant, idempotency_key)

    def quote_batch(
        self,
        items: Sequence[EstimateRequest | ServiceError],
        *,
        principal: Principal,
        verbose: bool,
    ) -> list[bytes | ServiceError]:
        """Price every valid item and store them together, answering each as JSON; invalid
        ones come back as errors.

        Items are priced together (service.batch_pricing: one cost-model evaluation per model
        and deployment, one regressor pass) and stored in one transaction."""
        tenant = principal.tenant
        calibration = self.calibrations.for_tenant(tenant) if self.calibrations else None
        requests = [item for item in items if not isinstance(item, ServiceError)]
        answers = iter(
            price_batch(self.estimator, requests, verbose=verbose, calibration=calibration)
        )
        results: list[_Priced | ServiceError] = []
        counts: Counter[tuple[str, str]] = Counter()
        for item in items:
            answer = item if isinstance(item, ServiceError) else next(answers)
            if isinstance(answer, ServiceError):
                results.append(answer)
                continue
            assert not isinstance(item, ServiceError)
            counts[answer.model_id, answer.gpu_id] += 1
            results.append(_Priced(item, request_fingerprint(item, verbose), answer))
        for (model, gpu), count in counts.items():
            self.metrics.count_estimates(model, gpu, count)
        priced = [r for r in results if isinstance(r, _Priced)]
        stored = iter(self._store(priced, tenant, None))
        return [next(stored) if isinstance(r, _Priced) else r for r in results]

    def _claim(self, tenant: str, key: str) -> Claim | None:
        """Claim `key` in the database; None (unclaimed, the in-process guard only) while the
        database is away; Conflict (409) while another process prices under it."""
        try:
            return self.store.claim(tenant, key)
        except KeyClaimed:
            raise Conflict(
                "a request with this Idempotency-Key is still in flight; retry later",
                headers={"Retry-After": "1"},
            ) from None
        except StoreFailed:
            self.metrics.db_errors.labels(operation="idempotency_claim").inc()
            return None

    def _price(self, request: EstimateRequest, verbose: bool, tenant: str) -> _Priced:
        """Price with the calibration current for `tenant` (its own, else the global one)."""
        calibration = self.calibrations.for_tenant(tenant) if self.calibrations else None
        priced = self.estimator.estimate(request, verbose=verbose, calibration=calibration)
        self.metrics.count_estimates(priced.model_id, priced.gpu_id)
        return _Priced(request, request_fingerprint(request, verbose), priced)

    def _price_together(
        self, requests: Sequence[EstimateRequest], tenant: str
    ) -> list[_Priced | ServiceError]:
        """`_price` of each request (not verbose), the requests priced together: one
        regressor pass, every answer exactly as priced alone."""
        if len(requests) == 1:
            try:
                return [self._price(requests[0], False, tenant)]
            except ServiceError as error:
                return [error]
        calibration = self.calibrations.for_tenant(tenant) if self.calibrations else None
        answers = price_batch(
            self.estimator, requests, verbose=False, calibration=calibration, array_groups=False
        )
        results: list[_Priced | ServiceError] = []
        for request, answer in zip(requests, answers, strict=True):
            if isinstance(answer, ServiceError):
                results.append(answer)
                continue
            self.metrics.count_estimates(answer.model_id, answer.gpu_id)
            results.append(_Priced(request, request_fingerprint(request, False), answer))
        return results

    def _store(
        self,
        priced: Sequence[_Priced],
        tenant: str,
        idempotency_key: str | None,
        claim: Claim | None = None,
    ) -> list[bytes]:
        """The JSON answers with their quote ids once committed (or spooled); without, plus a
        warning, if not. `claim` is released whatever happens."""
        if not priced:
            return []
        rows = [_quote_row(p, new_quote_id(), tenant, idempotency_key) for p in priced]
        try:
            saved = self._save(rows, claim)
        except StoreFailed:
            return self._not_stored(priced)
        return self._stored(priced, rows, saved)

    async def quote_grouped(
        self,
        request: EstimateRequest,
        *,
        principal: Principal,
        verbose: bool,
        together: bool = False,
        alone: Callable[[], bool] = lambda: False,
    ) -> bytes:
        """`quote` without an idempotency key, for a coroutine on the event loop: priced at
        once, or with `together` (the worker is busy) with the other requests that arrive in
        this loop iteration, at the next (service/pricing_queue.py; not when `price_together`
        is off or `verbose`); stored by the group-committing writer with other requests'
        quotes in one transaction. `alone()`: whether no other request is in progress once
        this one is priced (see QuoteWriter.save's `commit_now`).

        The caller makes sure the tenant's calibrations are fresh (`calibrations_fresh`), as
        a refresh reads the database and must not block the event loop."""
        if self.writer is None:
            raise RuntimeError("no quote writer: use quote()")
        if self.pricing is None or verbose or not together:
            priced = [self._price(request, verbose, principal.tenant)]
        else:
            priced = [await self.pricing.price(request, principal.tenant)]
        rows = [_quote_row(priced[0], new_quote_id(), principal.tenant, None)]
        try:
            saved = await self.writer.save(rows, commit_now=alone())
        except StoreFailed:
            return self._not_stored(priced)[0]
        return self._stored(priced, rows, saved)[0]

    def calibrations_fresh(self) -> bool:
        """Whether pricing now would read no calibrations from the database."""
        return self.calibrations is None or self.calibrations.fresh()

    def refresh_calibrations(self) -> None:
        """Read the current calibrations if they are due (a database read: thread pool)."""
        if self.calibrations is not None:
            self.calibrations.refresh()

    def _not_stored(self, priced: Sequence[_Priced]) -> list[bytes]:
        self.metrics.db_errors.labels(operation="store_quote").inc()
        return [_warned_json(p.estimate.document, NOT_STORED_WARNING) for p in priced]

    def _stored(
        self, priced: Sequence[_Priced], rows: Sequence[QuoteRow], saved: Saved
    ) -> list[bytes]:
        """The stored documents themselves (quote id, and created_at as stamped when stored),
        or, spooled, each with a warning that it is not in the database yet."""
        if saved is Saved.SPOOLED:  # each row's document has its quote id and created_at
            self.metrics.db_errors.labels(operation="store_quote").inc()
            return [_warned_json(_document(row), SPOOLED_WARNING) for row in rows]
        return [_document(row).text().encode() for row in rows]

    def _save(self, rows: Sequence[QuoteRow], claim: Claim | None) -> Saved:
        """Save `rows`; the claim goes in the same transaction, or separately if that fails."""
        released = False
        try:
            saved = self.store.save(rows, release=claim)
            released = saved is Saved.STORED
            return saved
        finally:
            if claim is not None and not released:
                self.store.release(claim)

    def _replay_winner(self, priced: _Priced, tenant: str, key: str) -> bytes:
        """Another request stored this key first: answer with its quote."""
        try:
            stored = self.store.by_idempotency_key(tenant, key)
        except StoreFailed:
            stored = None
        if stored is None:
            return _warned_json(priced.estimate.document, NOT_STORED_WARNING)
        return _replay(stored, priced.request_hash)


def _quote_row(
    priced: _Priced, quote_id: str, tenant: str, idempotency_key: str | None
) -> QuoteRow:
    """The row of `priced` stored as quote `quote_id` (its response document says so; its
    `created_at` is stamped when the row is committed)."""
    quote = priced.estimate
    document = replace(quote.document, quote_id=quote_id)
    return QuoteRow(
        id=quote_id,
        tenant=tenant,
        idempotency_key=idempotency_key,
        request_hash=priced.request_hash,
        request=priced.request.model_dump(mode="json", exclude_none=True),
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


def _replay(existing: StoredQuote, request_hash: str) -> bytes:
    if existing.request_hash != request_hash:
        raise IdempotencyMismatch(
            "this Idempotency-Key was already used with a different request body; "
            "use a new key for a new request"
        )
    return EstimateResponse.model_validate(existing.response).model_dump_json().encode()
