"""Closed-loop load: N keep-alive connections, each sending its next request as soon as the
previous one is answered, for a fixed time: what a server answers per second at most (with N
requests always in flight), and the latency each request saw from send to answer.

Bounded in time (`duration_s`, each request also `request_timeout_s`) and in count
(`max_requests` in all). Connections are opened one at a time, each answering a first request
before the next is opened, so uvicorn's workers share them (see `open_loop._used_connection`).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from load.http_client import ConnectionLost, HttpConnection
from load.open_loop import _used_connection, own_cpu_s


@dataclass
class ClosedLoopResult:
    connections: int
    duration_s: float
    statuses: Counter[str] = field(default_factory=Counter)  # status code, "connection", "timeout"
    latencies_ok_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    client_cpu_s: float = 0.0
    capped: bool = False  # stopped by `max_requests` before `duration_s`

    @property
    def ok(self) -> int:
        return len(self.latencies_ok_s)

    @property
    def not_ok(self) -> int:
        return sum(self.statuses.values()) - self.statuses["200"]

    @property
    def ok_per_s(self) -> float:
        return self.ok / self.wall_s if self.wall_s else 0.0


async def run_closed_loop(
    host: str,
    port: int,
    requests: Sequence[bytes],
    connections: int,
    duration_s: float,
    max_requests: int = 10_000_000,
    request_timeout_s: float = 10.0,
) -> ClosedLoopResult:
    """`connections` clients cycling through `requests` back to back for `duration_s`; a request
    under way at the deadline is waited for (at most `request_timeout_s`) and counted, and the
    wall time runs to the last answer."""
    clock = time.perf_counter
    result = ClosedLoopResult(connections, duration_s)
    pool = [await _used_connection(host, port) for _ in range(connections)]
    indices = itertools.count()
    cpu_before = own_cpu_s()
    start = clock()
    deadline = start + duration_s

    async def client(connection: HttpConnection) -> None:
        while clock() < deadline:
            index = next(indices)
            if index >= max_requests:
                result.capped = True
                return
            sent = clock()
            try:
                if connection.closed:
                    connection = await HttpConnection.open(host, port)
                status, _ = await asyncio.wait_for(
                    connection.request(requests[index % len(requests)]), request_timeout_s
                )
            except TimeoutError:
                result.statuses["timeout"] += 1
                connection.close()  # its answer may still come: never reuse it
                connection = HttpConnection()
                connection.closed = True
                continue
            except (ConnectionLost, OSError):
                result.statuses["connection"] += 1
                continue
            result.statuses[str(status)] += 1
            if status == 200:
                result.latencies_ok_s.append(clock() - sent)

    await asyncio.gather(*(client(connection) for connection in pool))
    result.wall_s = clock() - start
    result.client_cpu_s = own_cpu_s() - cpu_before
    for connection in pool:
        connection.close()
    return result
