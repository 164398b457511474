"""Open-loop, fixed-rate load: request i is due at t0 + i / rate whatever the server does, and
its latency is counted from that due time, so a stalled server is charged for every request it
delayed (no coordinated omission). A pool of keep-alive connections sends them; when all are
busy the due requests wait in the generator, and that wait is part of their latency.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import resource
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from load.http_client import ConnectionLost, HttpConnection


@dataclass
class StepResult:
    offered_per_s: float
    duration_s: float
    scheduled: int
    latencies_ok_s: list[float] = field(default_factory=list)
    latencies_all_s: list[float] = field(default_factory=list)
    shed: int = 0  # 503 overloaded (answered fast, by design)
    errors: int = 0  # any other non-2xx status, or a connection error
    error_kinds: Counter[str] = field(default_factory=Counter)  # status code or "connection"
    unsent: int = 0  # due in the step but not sent before the drain deadline
    stored: int = 0  # 200 with a quote id
    generator_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    database_cpu_s: float = 0.0  # PostgreSQL's server processes (SQLite's is the server's own)
    # Everything else on the machine: a loaded machine shows here, so a slow step can be told
    # from a busy neighbour.
    other_cpu_s: float = 0.0
    busiest_worker_share: float = float("nan")  # of the worker processes' CPU in the step
    wall_s: float = 0.0

    @property
    def ok(self) -> int:
        return len(self.latencies_ok_s)

    @property
    def achieved_per_s(self) -> float:
        return self.ok / self.wall_s if self.wall_s else 0.0


def own_cpu_s() -> float:
    """CPU time [s] this process has used so far (user and system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (fraction in [0, 1]); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(fraction * len(ordered) + 0.999999) - 1))
    return ordered[rank]


def _classify(result: StepResult, status: int, body: bytes, latency_s: float) -> None:
    result.latencies_all_s.append(latency_s)
    if status == 200:
        result.latencies_ok_s.append(latency_s)
        if b'"quote_id":"' in body:
            result.stored += 1
    elif status == 503 and b"/overloaded" in body:
        result.shed += 1
    else:
        result.errors += 1
        result.error_kinds[str(status)] += 1


async def _used_connection(host: str, port: int) -> HttpConnection:
    """A new keep-alive connection, once the server has answered a first request on it.

    Opened all at once, the pool's connections wait together in the listening socket's backlog
    and the worker that wakes first accepts most of them (uvicorn's workers race on one socket),
    so one worker would carry up to 60 % of every step. A client pool grows one connection at a
    time as it needs them; here each is used before the next is opened, so each accept is a new
    race between idle workers (the busiest worker's share is reported per step)."""
    connection = await HttpConnection.open(host, port)
    await connection.request(f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return connection


async def run_step(
    host: str,
    port: int,
    requests: Sequence[bytes],
    rate_per_s: float,
    duration_s: float,
    connections: int,
    drain_s: float = 10.0,
) -> StepResult:
    """Offer `rate_per_s` requests per second (cycling through `requests`) for `duration_s`."""
    clock = time.perf_counter  # uvloop's loop.time() is cached per iteration, at 1 ms resolution
    scheduled = int(rate_per_s * duration_s)
    result = StepResult(rate_per_s, duration_s, scheduled)
    pool = [await _used_connection(host, port) for _ in range(connections)]
    indices = itertools.count()
    cpu_before = own_cpu_s()
    start = clock() + 0.05
    deadline = start + duration_s + drain_s

    async def sender(connection: HttpConnection) -> None:
        for index in indices:
            if index >= scheduled:
                return
            due = start + index / rate_per_s
            delay = due - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            elif clock() > deadline:
                result.unsent += 1
                continue
            try:
                if connection.closed:
                    connection = await HttpConnection.open(host, port)
                status, body = await connection.request(requests[index % len(requests)])
            except (ConnectionLost, OSError):
                result.errors += 1
                result.error_kinds["connection"] += 1
                continue
            _classify(result, status, body, clock() - due)

    await asyncio.gather(*(sender(connection) for connection in pool))
    result.wall_s = max(duration_s, clock() - start)
    result.generator_cpu_s = own_cpu_s() - cpu_before
    for connection in pool:
        connection.close()
    return result


async def answering_requests(
    host: str, port: int, candidates: Sequence[bytes]
) -> tuple[list[bytes], int]:
    """The candidates the server prices (200), each sent once (warm-up); and how many it refused
    (422: a model that does not fit its GPUs, as a gateway would also send now and then)."""
    connection = await HttpConnection.open(host, port)
    kept: list[bytes] = []
    for raw in candidates:
        status, body = await connection.request(raw)
        if status == 200:
            kept.append(raw)
        elif status != 422:
            raise RuntimeError(f"warm-up request answered {status}: {json.loads(body)}")
    connection.close()
    return kept, len(candidates) - len(kept)
