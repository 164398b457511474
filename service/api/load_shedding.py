"""Overload shedding: a worker takes at most `max_concurrent` requests at once, lets at most
`max_queued` more wait for a slot, each for at most `max_queue_wait_s`; the rest are refused at
once with 503 + Retry-After (problem+json) instead of queueing without bound.

A gateway in front wants a fast "no" it can retry elsewhere, not a request that sits in an
unbounded queue until its own timeout fires. Operational routes (health, metrics) are never
shed, so an overloaded worker still reports itself.
"""

from __future__ import annotations

import asyncio
from collections import deque

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.problems import PROBLEM_MEDIA_TYPE, TYPE_BASE

EXEMPT_PATHS = frozenset({"/v1/health", "/metrics"})


class ConcurrencyGate:
    """`max_concurrent` slots and a FIFO queue of at most `max_queued` waiters (one event loop).

    `acquire` returns False when the caller must be shed: the queue is full, or no slot came
    free within `max_wait_s` seconds.
    """

    def __init__(self, max_concurrent: int, max_queued: int, max_wait_s: float) -> None:
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.max_wait_s = max_wait_s
        self.active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def queued(self) -> int:
        return len(self._waiters)

    async def acquire(self) -> bool:
        if self.active < self.max_concurrent and not self._waiters:
            self.active += 1
            return True
        if len(self._waiters) >= self.max_queued:
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.max_wait_s)
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return True  # the slot was handed over as the timeout fired: keep it
            waiter.cancel()
            self._waiters.remove(waiter)
            return False
        except asyncio.CancelledError:  # the client went away while waiting
            if waiter.done() and not waiter.cancelled():
                self.release()
            else:
                waiter.cancel()
                self._waiters.remove(waiter)
            raise
        return True  # the slot was handed over by release(): `active` already counts it

    def release(self) -> None:
        """Hand the slot to the oldest waiter, or free it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.active -= 1


def overloaded_response(retry_after_s: int, gate: ConcurrencyGate) -> JSONResponse:
    detail = (
        f"the service is at capacity ({gate.active} requests in progress, {gate.queued} "
        "waiting); retry later or elsewhere"
    )
    body = {"type": TYPE_BASE + "overloaded", "title": "Service Unavailable", "status": 503}
    return JSONResponse(
        {**body, "detail": detail},
        status_code=503,
        headers={"Retry-After": str(retry_after_s)},
        media_type=PROBLEM_MEDIA_TYPE,
    )


class LoadSheddingMiddleware:
    """Pure ASGI middleware putting every non-exempt HTTP request through a ConcurrencyGate."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_concurrent: int,
        max_queued: int,
        max_queue_wait_s: float,
        retry_after_s: int,
    ) -> None:
        self.app = app
        self.gate = ConcurrencyGate(max_concurrent, max_queued, max_queue_wait_s)
        self.retry_after_s = retry_after_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        if not await self.gate.acquire():
            await overloaded_response(self.retry_after_s, self.gate)(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.gate.release()
