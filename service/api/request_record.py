"""One pure ASGI middleware for what every request records about itself: its id (X-Request-ID,
stamped on every log line written while serving it), its key's rate-limit headers, and its
Prometheus count and latency by route template and status.

They were three middlewares, each wrapping `send` and adding a coroutine frame to every request
and every message of its answer; together they wrap it once.
"""

from __future__ import annotations

import os
import re
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.rate_limit import STATE_KEY, Decision
from service.logs import request_id
from service.metrics import Metrics

HEADER = "X-Request-ID"
_HEADER_KEY = HEADER.lower().encode()
# A caller's id is kept when it is a short token of printable ASCII (a UUID, a gateway's trace
# id); anything else (empty, too long, control characters) is replaced, not echoed into logs.
_USABLE = re.compile(rb"[\x21-\x7e]{1,128}")


class RequestIds:
    """New request ids: 32 hex digits of fresh random bytes (128 bits, as many as a UUID4's
    hex), drawn from the OS a page at a time rather than by one system call per request.
    Used from one event loop thread."""

    ID_BYTES = 16

    def __init__(self, ids_per_draw: int = 256) -> None:
        self._draw_bytes = ids_per_draw * self.ID_BYTES
        self._random = b""
        self._at = 0

    def new(self) -> str:
        at = self._at
        if at >= len(self._random):
            self._random, at = os.urandom(self._draw_bytes), 0
        self._at = at + self.ID_BYTES
        return self._random[at : at + self.ID_BYTES].hex()


class RequestRecordMiddleware:
    """Takes or makes the request's id and sets it for its logs; adds the id and the rate-limit
    headers (from the Decision the caller's admission left in the request state) to the answer,
    errors included; counts and times the request by route template (not raw path) and status.
    Outermost of the app's middlewares, so that every log line of a request has its id and its
    latency covers them all."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        self.ids = RequestIds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = None
        for name, value in scope["headers"]:
            if name == _HEADER_KEY:
                given = value
                break
        identifier = (
            given.decode("ascii")
            if given is not None and _USABLE.fullmatch(given)
            else self.ids.new()
        )
        status = 500

        async def send_recorded(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [h for h in message.get("headers", ()) if h[0] != _HEADER_KEY]
                headers.append((_HEADER_KEY, identifier.encode()))
                decision = scope.get("state", {}).get(STATE_KEY)
                if isinstance(decision, Decision):
                    headers += decision.raw_headers()
                message = {**message, "headers": headers}
            await send(message)

        token = request_id.set(identifier)
        try:
            await self.app(scope, receive, send_recorded)
        finally:
            request_id.reset(token)
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.observe_request(
                route, scope["method"], status, time.perf_counter() - started
            )
