"""Pure ASGI middleware: the request body read whole and bounded; large answers gzipped."""

from __future__ import annotations

import asyncio

from starlette.datastructures import Headers
from starlette.middleware.gzip import GZipMiddleware, GZipResponder, IdentityResponder
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.problems import http_problem, problem_response
from service.errors import MalformedBody


class BodyReadMiddleware:
    """Reads the whole request body before the app (and the load-shedding slot inside it) sees
    the request, then hands it on in one message.

    Refused here, each as a problem: a body over `max_bytes` (413; by Content-Length up front,
    or while reading), one not received within `timeout_s` seconds of the request's start
    (408: a client that stalls mid-body holds no slot, and its connection is closed), and one
    that is not UTF-8 text (400: JSON between systems is UTF-8, RFC 8259, and the standard
    library would otherwise take UTF-16 or UTF-32 for it).
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"request body larger than {self.max_bytes} bytes"
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await http_problem(413, too_large)(scope, receive, send)
                return
        chunks: list[bytes] = []
        seen = 0
        try:
            async with asyncio.timeout(self.timeout_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return  # the client went away: nothing to answer
                    chunk = message.get("body", b"")
                    seen += len(chunk)
                    if seen > self.max_bytes:
                        await http_problem(413, too_large)(scope, receive, send)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            detail = f"request body not received within {self.timeout_s:g} s"
            await http_problem(408, detail, {"Connection": "close"})(scope, receive, send)
            return
        body = b"".join(chunks)
        if not _utf8_text(body):
            detail = "request body is not UTF-8 text (JSON is UTF-8, without NUL bytes)"
            await problem_response(MalformedBody(detail))(scope, receive, send)
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()  # after the body: the disconnect, when it comes
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _utf8_text(body: bytes) -> bool:
    """Whether `body` is UTF-8 without NUL bytes: JSON text holds none (a NUL in a string is
    escaped), and the standard library reads bytes with NULs as UTF-16 or UTF-32."""
    if b"\x00" in body:
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class LargeAnswerGZipMiddleware(GZipMiddleware):
    """Starlette's GZipMiddleware, consulted only for answers that may reach its minimum size.

    GZip leaves an answer smaller than `minimum_size` as it is, but parses the request's and the
    answer's headers to find that out; a single quote (a few KB, under the minimum) is most of
    what the service answers. So an answer that declares a Content-Length below the minimum is
    passed on at once, and any other (larger, or streamed) goes through Starlette's own
    responder, chosen as GZipMiddleware chooses it: gzip when the client accepts it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        forward: Send | None = None

        async def send_small_as_is(message: Message) -> None:
            nonlocal forward
            if forward is None:  # the answer's start: decide for the whole answer
                if message["type"] == "http.response.start" and _declared_below(
                    message, self.minimum_size
                ):
                    forward = send
                else:
                    forward = self._responder(scope, send)
            await forward(message)

        await self.app(scope, receive, send_small_as_is)

    def _responder(self, scope: Scope, send: Send) -> Send:
        """What GZipMiddleware would send the answer through (its responder, on `send`)."""
        responder: IdentityResponder
        if "gzip" in Headers(scope=scope).get("Accept-Encoding", ""):
            responder = GZipResponder(
                self.app,
                self.minimum_size,
                compresslevel=self.compresslevel,
                thread_minimum_size=self.thread_minimum_size,
                exclude_content_types=self.exclude_content_types,
            )
        else:
            responder = IdentityResponder(
                self.app, self.minimum_size, exclude_content_types=self.exclude_content_types
            )
        responder.send = send
        return responder.send_with_compression


def _declared_below(start: Message, size: int) -> bool:
    """Whether the answer starting with `start` declares a Content-Length below `size`."""
    for name, value in start.get("headers", ()):
        if name == b"content-length":
            return value.isdigit() and int(value) < size
    return False
