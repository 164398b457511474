"""A minimal HTTP/1.1 keep-alive responder (uvloop): a fixed 200 JSON answer to every request.

Run as `python bench/load/static_server.py PORT`; the load test offers its top rates to it to
show the generator itself is not the bottleneck (what it can offer, at what CPU).
"""

from __future__ import annotations

import asyncio
import sys

import uvloop

BODY = b'{"quote_id":"q_static"}'
RESPONSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
    + str(len(BODY)).encode()
    + b"\r\n\r\n"
    + BODY
)


class StaticResponder(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(self.buffer[:end]).lower()
            marker = head.find(b"content-length:")
            length = 0
            if marker >= 0:
                line_end = head.find(b"\r\n", marker)
                length = int(head[marker + 15 : line_end if line_end >= 0 else len(head)])
            if len(self.buffer) < end + 4 + length:
                return
            del self.buffer[: end + 4 + length]
            assert self.transport is not None
            self.transport.write(RESPONSE)


async def serve(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(StaticResponder, "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1])))
