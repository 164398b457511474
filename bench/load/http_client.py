"""A minimal HTTP/1.1 keep-alive client on asyncio protocols: one request at a time per
connection, responses parsed just far enough to know the status and where the body ends.

Far cheaper per request than a general client (no header objects, no decoding), so that one
generator process on the bench machine can offer thousands of requests per second.
"""

from __future__ import annotations

import asyncio


class ConnectionLost(Exception):
    """The server closed the connection or sent something that is not an HTTP response."""


class HttpConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConnection:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(cls, host, port)
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop's own Transport class)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionLost(str(exc or "closed by the server")))

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._waiter is None or self._waiter.done():
            return
        end_of_head = self._buffer.find(b"\r\n\r\n")
        if end_of_head < 0:
            return
        head = bytes(self._buffer[:end_of_head]).lower()
        marker = head.find(b"content-length:")
        if not head.startswith(b"http/1.1 ") or marker < 0:
            self._waiter.set_exception(ConnectionLost("unparsable response head"))
            return
        line_end = head.find(b"\r\n", marker)
        length = int(head[marker + 15 : line_end if line_end >= 0 else len(head)])
        total = end_of_head + 4 + length
        if len(self._buffer) < total:
            return
        status = int(head[9:12])
        body = bytes(self._buffer[end_of_head + 4 : total])
        del self._buffer[:total]
        self._waiter.set_result((status, body))

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        """Send one pre-encoded request; the response's status code and body."""
        if self.closed or self.transport is None:
            raise ConnectionLost("connection closed")
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(raw)
        return await self._waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
