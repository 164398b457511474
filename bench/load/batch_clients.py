"""Closed-loop batch clients: each sends the same pre-encoded `POST /v1/estimate/batch` on its
own keep-alive connection again as soon as the answer is in, for a fixed time. With as many
clients as server workers, each on its own worker, every worker always has a batch to price, so
the answered items per second are what the server sustains for big batches, storage included.

uvicorn's workers race to accept connections on one socket, and a worker whose pricing thread
holds the GIL is slow to accept: so each connection is opened while the ones before it are in
the middle of a batch, and the idle worker takes it (the caller reports the busiest worker's
share of the CPU, which shows when this did not happen).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from load.http_client import HttpConnection
from load.open_loop import own_cpu_s

STAGGER_S = 0.05  # between opening one client's connection and the next one's


@dataclass
class BatchRun:
    clients: int
    duration_s: float
    batches: int = 0
    items: int = 0  # items answered with a stored quote (a quote id)
    statuses: Counter[int] = field(default_factory=Counter)
    wall_s: float = 0.0
    client_cpu_s: float = 0.0
    batch_latencies_s: list[float] = field(default_factory=list)

    @property
    def items_per_s(self) -> float:
        return self.items / self.wall_s if self.wall_s else 0.0


async def run_batches(
    host: str, port: int, raw_request: bytes, clients: int, duration_s: float
) -> BatchRun:
    """`clients` connections posting `raw_request` back to back for `duration_s` (a batch under
    way at the end is waited for and counted; the wall time runs until the last answer)."""
    run = BatchRun(clients, duration_s)
    connections: list[HttpConnection] = []
    cpu_before = own_cpu_s()
    start = time.perf_counter()
    deadline = start + duration_s

    async def client() -> None:
        connection = await HttpConnection.open(host, port)
        connections.append(connection)
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            status, body = await connection.request(raw_request)
            run.batch_latencies_s.append(time.perf_counter() - sent)
            run.statuses[status] += 1
            run.batches += 1
            if status == 200:
                run.items += body.count(b'"quote_id":"')

    tasks = []
    for _ in range(clients):
        tasks.append(asyncio.create_task(client()))
        await asyncio.sleep(STAGGER_S)  # the workers already serving are mid-batch
    await asyncio.gather(*tasks)
    run.wall_s = time.perf_counter() - start
    run.client_cpu_s = own_cpu_s() - cpu_before
    for connection in connections:
        connection.close()
    return run
