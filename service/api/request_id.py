"""X-Request-ID: every request gets an id, the caller's own when it sends a usable one, echoed
in the answer and stamped on every log line written while serving it (service.logs)."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.logs import request_id

HEADER = "X-Request-ID"
# A caller's id is kept when it is a short token of printable ASCII (a UUID, a gateway's trace
# id); anything else (empty, too long, control characters) is replaced, not echoed into logs.
_USABLE = re.compile(rb"[\x21-\x7e]{1,128}")


class RequestIdMiddleware:
    """Pure ASGI: takes or makes the id, sets it for the request's logs, adds it to the answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), None)
        identifier = (
            given.decode("ascii")
            if given is not None and _USABLE.fullmatch(given)
            else uuid.uuid4().hex
        )

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[HEADER] = identifier
            await send(message)

        token = request_id.set(identifier)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id.reset(token)
