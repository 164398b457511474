"""Hot-path estimates that arrive together in a busy worker are priced together.

Under load one event loop iteration starts several estimate requests (uvicorn starts a task for
each request whose bytes came in). When the worker is busy (service/api/fast_estimate.py,
PRICE_TOGETHER_FROM requests in progress or waiting), each waits here instead of pricing alone;
at the loop's next iteration everything that arrived is priced in one `price_batch` per tenant
(one onnxruntime pass instead of one each), and each request goes on with its own answer.
Overloaded, a worker answers more this way: 2,000/s offered, 51-219 of 30,000 requests shed
against 976-2,355 pricing at once (bench/results/price_together.md). A worker that keeps up
prices each request at once, which answers sooner.

Every request is priced by the one-request functions (`array_groups=False`), so its answer is
exactly what it would have been alone, whatever it arrived with.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from service.errors import ServiceError
from service.schemas.estimate_request import EstimateRequest

logger = logging.getLogger(__name__)
Priced = TypeVar("Priced")


@dataclass(frozen=True, slots=True)
class _Waiting(Generic[Priced]):
    request: EstimateRequest
    tenant: str
    future: asyncio.Future[Priced]


class PricingQueue(Generic[Priced]):
    """Requests of one or more event loops waiting to be priced at their loop's next
    iteration.

    `price_together(requests, tenant)` prices one tenant's requests together and gives each
    request's result, or its ServiceError, in order."""

    def __init__(
        self,
        price_together: Callable[[Sequence[EstimateRequest], str], Sequence[Priced | ServiceError]],
    ) -> None:
        self._price_together = price_together
        self._inboxes: dict[asyncio.AbstractEventLoop, list[_Waiting[Priced]]] = {}

    async def price(self, request: EstimateRequest, tenant: str) -> Priced:
        """`request`'s result as `price_together` gives it, priced with the requests that
        arrive in this loop iteration; raises its ServiceError."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Priced] = loop.create_future()
        inbox = self._inboxes.get(loop)
        if inbox is None:
            self._inboxes[loop] = inbox = []
            loop.call_soon(self._price_inbox, loop)
        inbox.append(_Waiting(request, tenant, future))
        return await future

    def _price_inbox(self, loop: asyncio.AbstractEventLoop) -> None:
        waiting = self._inboxes.pop(loop)
        by_tenant: dict[str, list[_Waiting[Priced]]] = {}
        for item in waiting:
            if not item.future.cancelled():  # its client went away before it was priced
                by_tenant.setdefault(item.tenant, []).append(item)
        for tenant, items in by_tenant.items():
            if len(items) == 1:
                self._price_alone(items[0])
                continue
            try:
                results = self._price_together([item.request for item in items], tenant)
            except Exception:  # a bug, not a bad request: only the request that hits it fails
                logger.exception("pricing %d requests together failed", len(items))
                for item in items:
                    self._price_alone(item)
                continue
            for item, result in zip(items, results, strict=True):
                _answer(item.future, result)

    def _price_alone(self, item: _Waiting[Priced]) -> None:
        try:
            (result,) = self._price_together([item.request], item.tenant)
        except Exception as error:
            _fail(item.future, error)
        else:
            _answer(item.future, result)


def _answer(future: asyncio.Future[Priced], result: Priced | ServiceError) -> None:
    if isinstance(result, ServiceError):
        _fail(future, result)
    else:
        _settle(future, result)


def _settle(future: asyncio.Future[Priced], result: Priced) -> None:
    if not future.cancelled():
        future.set_result(result)


def _fail(future: asyncio.Future[Priced], error: Exception) -> None:
    if not future.cancelled():
        future.set_exception(error)
