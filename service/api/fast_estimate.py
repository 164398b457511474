"""The estimate hot path: `POST /v1/estimate` answered in the event loop, without FastAPI's
routing, dependency solving and thread-pool hop, its quote stored by the group-committing
QuoteWriter.

A gateway calls the estimate before every LLM request, so the framework's fixed cost per
request (more than the cost model itself) is paid here only where it buys something. This
middleware takes the plain case: a JSON body that validates, a caller known from the key cache
(or open dev mode) with the `estimate` scope, no `Idempotency-Key`, no query string. It answers
exactly what the FastAPI route would (the same validation, pricing, storage, rate limit and
problem documents; tests/api/test_fast_estimate.py compares the two). Every other request is
passed on untouched, its body replayed, to the route, which answers it as always.

It sits inside the metrics, rate-limit-header, load-shedding and body-limit middleware, so those
apply to it unchanged.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from pydantic import TypeAdapter
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.deps import AppServices, count_request, known_principal
from service.api.load_shedding import GATE_SCOPE_KEY, ConcurrencyGate
from service.api.problems import http_problem, problem_response
from service.auth import Principal
from service.errors import ServiceError
from service.schemas.estimate_request import EstimateRequest

logger = logging.getLogger(__name__)

ESTIMATE_PATH = "/v1/estimate"
ESTIMATE_SCOPE = "estimate"
_request_adapter: TypeAdapter[EstimateRequest] = TypeAdapter(EstimateRequest)
# Requests in progress or waiting in this worker (this one included) from which an estimate is
# priced with the others of its loop iteration (service/pricing_queue.py) rather than at once.
# A worker that keeps up has one or two in progress; pricing at once answers soonest there, and
# pricing together from 4 on made p50 at 1,000/s worse (a slower answer keeps more requests in
# progress, which keeps the worker "busy"). From 16 on, four interleaved rounds on a quiet
# machine: 2,000/s offered, 51-219 shed against 976-2,355 pricing at once; 2,500/s, 2,365-2,388
# against 2,099-2,221 answered per second (bench/results/price_together.md).
PRICE_TOGETHER_FROM = 16


class _PassOn(Exception):
    """This request is the FastAPI route's to answer."""


class _ClientGone(Exception):
    """The client disconnected before its body arrived: there is no one to answer."""


class FastEstimateMiddleware:
    """Pure ASGI middleware answering plain single estimates itself (see the module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._route: RouteContext | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != ESTIMATE_PATH
            or scope["method"] != "POST"
            or scope["query_string"]
        ):
            await self.app(scope, receive, send)
            return
        services: AppServices | None = getattr(scope["app"].state, "services", None)
        headers = _plain_headers(scope)
        if services is None or services.quotes.writer is None or headers is None:
            await self.app(scope, receive, send)
            return
        body = b""
        try:
            principal = await _principal(services, headers.get(b"authorization"))
            body = await _read_body(receive)
            request = _valid_request(body)
        except _PassOn:
            await self.app(scope, _replay(body, receive), send)
            return
        except _ClientGone:
            return
        except HTTPException as error:  # the body limit, hit while reading a streamed body
            await http_problem(error.status_code, str(error.detail), error.headers)(
                scope, receive, send
            )
            return
        scope["route"] = self._estimate_route(scope)  # the route template the metrics label
        await self._answer(scope, receive, send, services, principal, request)

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        services: AppServices,
        principal: Principal,
        request: EstimateRequest,
    ) -> None:
        quotes = services.quotes
        try:
            count_request(scope, principal, ESTIMATE_SCOPE)  # RateLimited (429) when refused
            if not quotes.calibrations_fresh():
                await run_in_threadpool(quotes.refresh_calibrations)
            gate: ConcurrencyGate | None = scope.get(GATE_SCOPE_KEY)
            busy = gate is not None and gate.active + gate.queued >= PRICE_TOGETHER_FROM

            def alone() -> bool:  # asked once priced: others may have come in meanwhile
                return gate is not None and gate.active <= 1 and not gate.queued

            quote = await quotes.quote_grouped(
                request, principal=principal, verbose=False, together=busy, alone=alone
            )
        except ServiceError as error:
            await problem_response(error)(scope, receive, send)
            return
        except Exception as error:  # as the app's last-resort handler answers the route's
            logger.exception("unhandled error on %s", ESTIMATE_PATH, exc_info=error)
            failure = ServiceError("an unexpected error occurred; it has been logged")
            await problem_response(failure)(scope, receive, send)
            return
        content = quote  # the stored document's JSON
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-length", str(len(content)).encode()),
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})

    def _estimate_route(self, scope: Scope) -> RouteContext | None:
        """The route (with its full path) the FastAPI router would have matched."""
        if self._route is None:
            for context in iter_route_contexts(scope["app"].routes):
                route = context.original_route
                if (
                    context.path == ESTIMATE_PATH
                    and isinstance(route, APIRoute)
                    and "POST" in (route.methods or ())
                ):
                    self._route = context
        return self._route


def _plain_headers(scope: Scope) -> dict[bytes, bytes] | None:
    """The headers the fast path reads, or None when the request is not a plain one (an
    Idempotency-Key, a body that is not `application/json`)."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name == b"idempotency-key":
            return None
        if name in (b"authorization", b"content-type"):
            if name in found:
                return None
            found[name] = value
    media_type = found.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
    if media_type != b"application/json":
        return None
    return found


async def _principal(services: AppServices, authorization: bytes | None) -> Principal:
    """The caller, as the route's dependency finds it, if it may estimate; _PassOn otherwise
    (the route then answers 401 or 403)."""
    token = None
    if authorization is not None:  # only a bearer key here; the route words any other
        scheme, _, token = authorization.decode("latin-1").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise _PassOn()
    principal = await known_principal(services.keys, token)
    if principal is None or not principal.allows(ESTIMATE_SCOPE):
        raise _PassOn()
    return principal


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _ClientGone()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _valid_request(body: bytes) -> EstimateRequest:
    """The request as the route would validate it (json.loads, then the model in Python
    mode); _PassOn for anything the route would refuse, so that it words the 422 itself."""
    if not body:
        raise _PassOn()
    try:
        document: Any = json.loads(body)
        return _request_adapter.validate_python(document)
    except Exception:  # invalid JSON or model, nesting too deep: the route words the answer
        raise _PassOn() from None


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` with the body already read given back first."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
