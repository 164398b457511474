"""Throughput and tail latency of the service against a bare FastAPI app, in the same run.

    python bench/throughput.py [--workers 2] [--seconds 20] [--connections 32] [--rate 300]
                               [--rounds 3] [--batch-repeats 7]
                               [--output bench/results/throughput.md]

The goal measured: with 2 uvicorn workers and quotes stored on SQLite, the service answers at
least 0.45 x what a bare FastAPI app serves on the same machine, in the same run, from the same
client, when that app validates the same body with pydantic and answers a document of the same
size; its p99 is no worse than 4 x the bare app's; a 1000-item batch takes <= 250 ms.

1. The service (`uvicorn service.main:app --workers N --loop uvloop --http httptools`, a fresh
   migrated SQLite file, quotes stored as in production, the per-key rate limit set out of
   reach as in bench/load_test.py) is started, warmed up with every request body of a seeded
   realistic mix (bench/load/bodies.py; bodies it refuses with 422 are dropped), and a real
   answer of median size and a real answer to the 1000-item batch are captured.
2. The bare app (bench/load/bare_app.py: the service's own `EstimateRequest` pydantic model,
   `async def` routes answering those captured bytes) is started the same way beside it.
3. Each round measures both, one after the other for each measurement (which goes first
   alternates round by round, so a slow spell of this shared machine hits both alike):
   (a) closed loop: `--connections` keep-alive connections each sending the next request as
       soon as the last is answered, for `--seconds`: answered 200/s (bench/load/closed_loop.py);
   (b) open loop at `--rate` requests/s for `--seconds`: p50/p99 from each request's due time
       (bench/load/open_loop.py);
   (c) the 1000-item `POST /v1/estimate/batch` sent `--batch-repeats` times, one at a time after a
       warm-up one: median wall time (request written to last byte read).
   The ratios service / bare are taken per round, and their median over rounds is judged
   against the goals. The client runs on the same machine as both servers: its own CPU time
   and the rest of the machine's (anything but the measured server and the client: the idle
   other server, neighbours) are reported per measurement.

Only 127.0.0.1 is targeted; every loop is bounded in time and in count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import uvloop
from load.bodies import encoded_post, estimate_body
from load.closed_loop import ClosedLoopResult, run_closed_loop
from load.http_client import HttpConnection
from load.open_loop import StepResult, answering_requests, own_cpu_s, percentile, run_step
from load.server import (
    REPOSITORY,
    RunningServer,
    machine_busy_cpu_s,
    migrated_server_env,
    uvicorn_server,
)
from report_file import opening, write_report

# The database is migrated by this checkout's service package (imported when the server is
# prepared), not by an installed one whose migrations may be older than the served code's.
sys.path.insert(0, str(REPOSITORY))

HOST = "127.0.0.1"  # the only address this benchmark sends to
BARE_APP = "load.bare_app:app"
UNREACHED_QUOTA_PER_S = 1_000_000
THROUGHPUT_GOAL = 0.45  # service / bare, at least
P99_GOAL = 4.0  # service / bare, at most
BATCH_GOAL_S = 0.250
BATCH_ITEMS = 1000
REQUEST_TIMEOUT_S = 30.0
APPS = ("service", "bare")
T = TypeVar("T")


@dataclass
class Measured:
    """One measurement of one app: the client's result and the CPU spent meanwhile."""

    result: Any
    server_cpu_s: float
    client_cpu_s: float
    idle_cpu_s: float  # the other app's, idle meanwhile
    other_cpu_s: float  # the machine's busy time less both apps' and the client's
    wall_s: float


@dataclass
class BatchTimes:
    latencies_s: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    answer_bytes: int = 0
    priced: int = 0  # items of the last answer with a quote id (the bare app's: its document's)

    @property
    def median_s(self) -> float:
        return statistics.median(self.latencies_s) if self.latencies_s else float("nan")


@dataclass
class Round:
    number: int
    first: str
    closed: dict[str, Measured] = field(default_factory=dict)
    open: dict[str, Measured] = field(default_factory=dict)
    batch: dict[str, Measured] = field(default_factory=dict)

    def throughput_ratio(self) -> float:
        return _ratio(self.closed["service"].result.ok_per_s, self.closed["bare"].result.ok_per_s)

    def p99(self, app: str) -> float:
        return percentile(self.open[app].result.latencies_ok_s, 0.99)

    def p50(self, app: str) -> float:
        return percentile(self.open[app].result.latencies_ok_s, 0.5)

    def p99_ratio(self) -> float:
        return _ratio(self.p99("service"), self.p99("bare"))

    def batch_s(self, app: str) -> float:
        times: BatchTimes = self.batch[app].result
        return times.median_s


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else float("nan")


def measure(
    step: Callable[[], Coroutine[Any, Any, T]],
    server: RunningServer,
    idle: RunningServer,
    budget_s: float,
    client_cpu_s: Callable[[T], float] | None = None,
) -> Measured:
    """Run `step()` against `server` under a hard time budget and read the CPU that server, the
    `idle` other app, this client and the rest of the machine used meanwhile."""
    server_before, idle_before = server.cpu_seconds(), idle.cpu_seconds()
    machine_before, client_before = machine_busy_cpu_s(), own_cpu_s()
    started = time.perf_counter()
    result = asyncio.run(asyncio.wait_for(step(), budget_s))
    wall_s = time.perf_counter() - started
    server_s = server.cpu_seconds() - server_before
    idle_s = idle.cpu_seconds() - idle_before
    client_s = client_cpu_s(result) if client_cpu_s else own_cpu_s() - client_before
    other_s = max(0.0, machine_busy_cpu_s() - machine_before - server_s - idle_s - client_s)
    return Measured(result, server_s, client_s, idle_s, other_s, wall_s)


async def time_batches(port: int, raw: bytes, repeats: int) -> BatchTimes:
    """Send `raw` once to warm up, then `repeats` times one after the other on one connection."""
    times = BatchTimes()
    connection = await HttpConnection.open(HOST, port)
    try:
        await asyncio.wait_for(connection.request(raw), REQUEST_TIMEOUT_S)
        for _ in range(repeats):
            sent = time.perf_counter()
            status, body = await asyncio.wait_for(connection.request(raw), REQUEST_TIMEOUT_S)
            times.latencies_s.append(time.perf_counter() - sent)
            times.statuses[status] += 1
            times.answer_bytes = len(body)
            times.priced = body.count(b'"quote_id":"')
    finally:
        connection.close()
    return times


async def answers(port: int, requests: list[bytes]) -> list[tuple[int, bytes]]:
    """Each request sent once, in order, on one connection: the statuses and bodies."""
    connection = await HttpConnection.open(HOST, port)
    try:
        return [
            await asyncio.wait_for(connection.request(raw), REQUEST_TIMEOUT_S) for raw in requests
        ]
    finally:
        connection.close()


def known_models(port: int) -> set[str]:
    with urllib.request.urlopen(f"http://{HOST}:{port}/v1/models", timeout=10) as answer:
        return {item["id"] for item in json.load(answer)["items"]}


def priced_batch_items(port: int, rng: random.Random, models: set[str]) -> list[dict[str, Any]]:
    """`BATCH_ITEMS` items of the realistic mix that the service prices (it refuses some with a
    422 problem in the batch answer: a model that does not fit its GPUs); at most 5 tries."""
    kept: list[dict[str, Any]] = []
    for _ in range(5):
        candidates = [estimate_body(rng, models) for _ in range(BATCH_ITEMS)]
        raw = encoded_post("/v1/estimate/batch", {"items": candidates}, HOST)
        [(status, body)] = asyncio.run(answers(port, [raw]))
        if status != 200:
            raise RuntimeError(f"batch warm-up answered {status}: {body[:500]!r}")
        items = json.loads(body)["items"]
        kept += [
            item for item, answer in zip(candidates, items, strict=True) if "quote_id" in answer
        ]
        if len(kept) >= BATCH_ITEMS:
            return kept[:BATCH_ITEMS]
    raise RuntimeError(f"only {len(kept)} of {BATCH_ITEMS} batch items priced")


@dataclass
class Workload:
    requests: list[bytes]  # single estimates, each priced by the service
    refused: int  # candidates the service refused (422), left out
    batch: bytes  # the 1000-item batch request
    estimate_doc: bytes  # a real answer of median size
    batch_doc: bytes  # the real answer to `batch`
    answer_sizes: list[int]


def prepare(service: RunningServer, args: argparse.Namespace) -> Workload:
    """The request pool (warming the service up) and the real answers the bare app will send."""
    rng = random.Random(args.seed)
    models = known_models(service.port)
    candidates = [
        encoded_post("/v1/estimate", estimate_body(rng, models), HOST) for _ in range(args.bodies)
    ]
    requests, refused = asyncio.run(answering_requests(HOST, service.port, candidates))
    answered = asyncio.run(answers(service.port, requests))
    assert all(status == 200 for status, _ in answered), "a priced body was refused next time"
    by_size = sorted(answered, key=lambda answer: len(answer[1]))
    estimate_doc = by_size[len(by_size) // 2][1]
    items = priced_batch_items(service.port, rng, models)
    batch = encoded_post("/v1/estimate/batch", {"items": items}, HOST)
    [(status, batch_doc)] = asyncio.run(answers(service.port, [batch]))
    assert status == 200 and batch_doc.count(b'"quote_id":"') == BATCH_ITEMS, status
    sizes = [len(body) for _, body in answered]
    return Workload(requests, refused, batch, estimate_doc, batch_doc, sizes)


def check_bare(bare: RunningServer, work: Workload) -> None:
    """The bare app validates every body (200) and answers the captured documents."""
    answered = asyncio.run(answers(bare.port, [*work.requests, work.batch]))
    statuses = Counter(status for status, _ in answered)
    assert statuses == Counter({200: len(answered)}), f"the bare app answered {statuses}"
    assert answered[0][1] == work.estimate_doc and answered[-1][1] == work.batch_doc


def run_round(
    number: int, servers: dict[str, RunningServer], work: Workload, args: argparse.Namespace
) -> Round:
    order = APPS if number % 2 else APPS[::-1]
    other = {"service": "bare", "bare": "service"}
    result = Round(number, order[0])
    budget_s = args.seconds + 60
    for app in order:
        server = servers[app]
        result.closed[app] = measure(
            lambda port=server.port: run_closed_loop(
                HOST, port, work.requests, args.connections, args.seconds,
                max_requests=int(args.seconds * 20_000), request_timeout_s=REQUEST_TIMEOUT_S,
            ),
            server, servers[other[app]], budget_s, lambda closed: closed.client_cpu_s,
        )  # fmt: skip
        closed: ClosedLoopResult = result.closed[app].result
        print(f"[round {number}] {app}: closed loop {closed.ok_per_s:.0f} 200/s "
              f"({closed.not_ok} other)", flush=True)  # fmt: skip
        time.sleep(args.pause_s)
    for app in order:
        server = servers[app]
        result.open[app] = measure(
            lambda port=server.port: run_step(
                HOST, port, work.requests, args.rate, args.seconds, args.connections, drain_s=10
            ),
            server, servers[other[app]], budget_s, lambda step: step.generator_cpu_s,
        )  # fmt: skip
        step: StepResult = result.open[app].result
        print(f"[round {number}] {app}: {args.rate:g}/s offered, {step.ok} of {step.scheduled} "
              f"answered 200, p50 {result.p50(app) * 1e3:.1f} ms, p99 "
              f"{result.p99(app) * 1e3:.1f} ms", flush=True)  # fmt: skip
        time.sleep(args.pause_s)
    for app in order:
        server = servers[app]
        result.batch[app] = measure(
            lambda port=server.port: time_batches(port, work.batch, args.batch_repeats),
            server, servers[other[app]], args.batch_repeats * REQUEST_TIMEOUT_S + 60,
        )  # fmt: skip
        print(f"[round {number}] {app}: batch median {result.batch_s(app) * 1e3:.0f} ms",
              flush=True)  # fmt: skip
        time.sleep(args.pause_s)
    return result


# --- the report ------------------------------------------------------------------------------


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def _percent(seconds: float, measured: Measured) -> str:
    return f"{100 * seconds / measured.wall_s:.0f}" if measured.wall_s else "-"


def _cpu(m: Measured) -> str:
    """The client's, the idle other app's and the rest of the machine's CPU columns."""
    return (
        f"| {_percent(m.client_cpu_s, m)} | {_percent(m.idle_cpu_s, m)} "
        f"| {_percent(m.other_cpu_s, m)} "
    )


CPU_HEADS = "| client CPU % | other app CPU % | rest of machine CPU % "


def _us_per_ok(m: Measured) -> float:
    ok: int = m.result.ok
    return m.server_cpu_s / ok * 1e6 if ok else float("nan")


def _yes(met: bool) -> str:
    return "**yes**" if met else "**no**"


def summary(rounds: list[Round]) -> list[str]:
    def median(values: list[float]) -> float:
        return statistics.median(values)

    throughput = {app: median([r.closed[app].result.ok_per_s for r in rounds]) for app in APPS}
    p50 = {app: median([r.p50(app) for r in rounds]) for app in APPS}
    p99 = {app: median([r.p99(app) for r in rounds]) for app in APPS}
    batch = {app: median([r.batch_s(app) for r in rounds]) for app in APPS}
    throughput_ratio = median([r.throughput_ratio() for r in rounds])
    p99_ratio = median([r.p99_ratio() for r in rounds])
    p50_ratio = median([_ratio(r.p50("service"), r.p50("bare")) for r in rounds])
    batch_ratio = median([_ratio(r.batch_s("service"), r.batch_s("bare")) for r in rounds])
    cpu = {app: median([_us_per_ok(r.closed[app]) for r in rounds]) for app in APPS}
    cpu_ratio = median([_ratio(_us_per_ok(r.closed["service"]), _us_per_ok(r.closed["bare"]))
                        for r in rounds])  # fmt: skip
    return [
        "| measure (median over rounds) | service | bare app | service / bare | goal | met |",
        "|---|--:|--:|--:|---|---|",
        f"| closed-loop throughput, 200/s | {throughput['service']:.0f} "
        f"| {throughput['bare']:.0f} | **{throughput_ratio:.2f}** | ≥ {THROUGHPUT_GOAL} x bare "
        f"| {_yes(throughput_ratio >= THROUGHPUT_GOAL)} |",
        f"| open-loop p99, ms | {p99['service'] * 1e3:.1f} | {p99['bare'] * 1e3:.1f} "
        f"| **{p99_ratio:.2f}** | ≤ {P99_GOAL:g} x bare | {_yes(p99_ratio <= P99_GOAL)} |",
        f"| open-loop p50, ms | {p50['service'] * 1e3:.1f} | {p50['bare'] * 1e3:.1f} "
        f"| {p50_ratio:.2f} | - | - |",
        f"| {BATCH_ITEMS}-item batch, ms | **{batch['service'] * 1e3:.0f}** "
        f"| {batch['bare'] * 1e3:.0f} | {batch_ratio:.2f} | service ≤ {BATCH_GOAL_S * 1e3:.0f} ms "
        f"| {_yes(batch['service'] <= BATCH_GOAL_S)} |",
        f"| server CPU per closed-loop 200, µs | {cpu['service']:.0f} | {cpu['bare']:.0f} "
        f"| {cpu_ratio:.2f} | - | - |",
    ]


def closed_table(rounds: list[Round]) -> list[str]:
    lines = [
        "| round | app | 200/s | 200 | other answers | server CPU µs/200 "
        + CPU_HEADS
        + "| service / bare |",
        "|--:|---|--:|--:|---|--:|--:|--:|--:|--:|",
    ]
    for r in rounds:
        for app in APPS:
            m = r.closed[app]
            closed: ClosedLoopResult = m.result
            other = ", ".join(
                f"{count}x {status}" for status, count in sorted(closed.statuses.items())
                if status != "200"
            ) or "0"  # fmt: skip
            ratio = f"{r.throughput_ratio():.2f}" if app == "service" else ""
            lines.append(
                f"| {r.number} | {app} | {closed.ok_per_s:.0f} | {closed.ok} | {other} "
                f"| {_us_per_ok(m):.0f} {_cpu(m)}| {ratio} |"
            )
    return lines


def open_table(rounds: list[Round]) -> list[str]:
    lines = [
        "| round | app | offered / its closed-loop 200/s | 200 of scheduled "
        "| shed, errors, unsent | p50 ms | p99 ms | p99.9 ms | max ms | server CPU µs/200 "
        + CPU_HEADS
        + "| p99 service / bare |",
        "|--:|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rounds:
        for app in APPS:
            m = r.open[app]
            step: StepResult = m.result
            lat = step.latencies_ok_s
            ratio = f"{r.p99_ratio():.2f}" if app == "service" else ""
            load = _ratio(step.offered_per_s, r.closed[app].result.ok_per_s)
            lines.append(
                f"| {r.number} | {app} | {load:.2f} | {step.ok} of {step.scheduled} "
                f"| {step.shed}, {step.errors}, {step.unsent} | {percentile(lat, 0.5) * 1e3:.1f} "
                f"| {percentile(lat, 0.99) * 1e3:.1f} | {percentile(lat, 0.999) * 1e3:.1f} "
                f"| {max(lat, default=float('nan')) * 1e3:.1f} | {_us_per_ok(m):.0f} {_cpu(m)}"
                f"| {ratio} |"
            )
    return lines


def batch_table(rounds: list[Round]) -> list[str]:
    lines = [
        "| round | app | median ms | min ms | max ms | statuses | items with a quote id "
        "| answer bytes | server CPU ms/batch " + CPU_HEADS + "|",
        "|--:|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rounds:
        for app in APPS:
            m = r.batch[app]
            times: BatchTimes = m.result
            statuses = ", ".join(f"{n}x {s}" for s, n in sorted(times.statuses.items()))
            sent = len(times.latencies_s) + 1  # with the warm-up batch
            lines.append(
                f"| {r.number} | {app} | {times.median_s * 1e3:.0f} "
                f"| {min(times.latencies_s) * 1e3:.0f} | {max(times.latencies_s) * 1e3:.0f} "
                f"| {statuses} | {times.priced} | {times.answer_bytes:,} "
                f"| {m.server_cpu_s / sent * 1e3:.0f} {_cpu(m)}|"
            )
    return lines


def report(rounds: list[Round], work: Workload, args: argparse.Namespace, took_s: float) -> str:
    nproc = len(os.sched_getaffinity(0))
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    note = f"; nproc {nproc}, CPU {cpu_model()}; load average at the end {load}"
    sizes = sorted(work.answer_sizes)
    return "\n".join([
        opening("Throughput and tail latency: the service against a bare FastAPI app", note),
        f"- took: {took_s:.0f} s; {args.rounds} rounds of {args.seconds:g} s measurements, "
        f"{args.workers} uvicorn workers each, {args.connections} connections",
        "",
        "Both apps run at once as `uvicorn APP --workers "
        f"{args.workers} --loop uvloop --http httptools` on 127.0.0.1, the client (this script, "
        "one process, uvloop) on the same machine. **service**: `service.main:app` with default "
        "settings on a fresh migrated SQLite file (quotes stored as in production; the per-key "
        "rate limit set out of reach, as in bench/load_test.py, since one client sends it all). "
        "**bare**: `bench/load/bare_app.py`, `async def` routes that validate the body with the "
        "service's own `EstimateRequest` pydantic model and answer bytes captured from the "
        f"service at start-up: a real quote of median size ({len(work.estimate_doc):,} bytes; "
        f"the service's answers ran {sizes[0]:,}-{sizes[-1]:,}) and the real answer to the "
        f"{BATCH_ITEMS}-item batch ({len(work.batch_doc):,} bytes). Requests cycle through "
        f"{len(work.requests)} seeded bodies of the realistic mix (`bench/load/bodies.py`, "
        f"seed {args.seed}; {work.refused} more the service refuses with 422 were left out), "
        f"the batch holds {BATCH_ITEMS} items of that mix which the service prices.",
        "",
        "Each round measures both apps back to back for each measurement, the one that goes first "
        "alternating round by round; ratios are per round (paired), and the summary is their "
        "median. `server CPU` is the measured app's uvicorn processes' CPU time (SQLite runs "
        "inside them) per answered request or batch. `client CPU %` is the client's own CPU "
        "time over the measurement (100 % = one of the machine's cores), `other app CPU %` the "
        "idle other app's, `rest of machine CPU %` the machine's busy time less all of those "
        "(neighbours on this shared VM): on 2 cores the client and neighbours take CPU the "
        "servers would otherwise use, and with more than a few per cent of neighbours a round "
        "understates both apps' throughput, and their ratio less than either. Server CPU per "
        "answered request is the figure least moved by neighbours: the inverse of its ratio "
        "(bare / service) is roughly the throughput ratio both apps would reach with the "
        "machine's CPU to themselves. "
        "`offered / its closed-loop 200/s` above about 0.7 means the open-loop rate was near "
        "that app's capacity in that round, and its p99 measures queueing.",
        "",
        "## Summary",
        "",
        *summary(rounds),
        "",
        f"## Closed loop: {args.connections} connections, each sending its next request when "
        f"the last is answered, {args.seconds:g} s",
        "",
        *closed_table(rounds),
        "",
        f"## Open loop: {args.rate:g} requests/s for {args.seconds:g} s, latency from each "
        "request's due time",
        "",
        *open_table(rounds),
        "",
        f"## {BATCH_ITEMS}-item `POST /v1/estimate/batch`, one at a time, {args.batch_repeats} "
        "timed after a warm-up",
        "",
        *batch_table(rounds),
        "",
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers of each app")
    parser.add_argument("--seconds", type=float, default=20.0, help="each load measurement [s]")
    parser.add_argument("--connections", type=int, default=32, help="keep-alive connections")
    parser.add_argument("--rate", type=float, default=300.0, help="open-loop rate [req/s]")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-repeats", type=int, default=7, help="timed batches per round")
    parser.add_argument("--bodies", type=int, default=400, help="distinct request bodies")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pause-s", type=float, default=1.0, help="between measurements [s]")
    parser.add_argument("--output", type=Path, default=Path("bench/results/throughput.md"))
    args = parser.parse_args()
    if args.rounds < 1 or args.seconds <= 0 or args.rate <= 0 or args.batch_repeats < 1:
        parser.error("--rounds, --seconds, --rate and --batch-repeats must be positive")
    uvloop.install()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="throughput-") as scratch_dir:
        scratch = Path(scratch_dir)
        log = scratch / "uvicorn.log"
        env = migrated_server_env(
            f"sqlite:///{scratch / 'quotes.sqlite3'}",
            QUOTES_RATE_LIMITS=json.dumps({"estimate": UNREACHED_QUOTA_PER_S}),
        )
        try:
            with uvicorn_server(env, args.workers, log) as service:
                work = prepare(service, args)
                print(f"service: {len(work.requests)} bodies priced, {work.refused} refused; "
                      f"answer {len(work.estimate_doc)} bytes, batch answer "
                      f"{len(work.batch_doc)} bytes", flush=True)  # fmt: skip
                (scratch / "estimate.json").write_bytes(work.estimate_doc)
                (scratch / "batch.json").write_bytes(work.batch_doc)
                bare_env = {
                    "PYTHONPATH": os.pathsep.join([str(REPOSITORY), str(REPOSITORY / "bench")]),
                    "BARE_ESTIMATE_DOC": str(scratch / "estimate.json"),
                    "BARE_BATCH_DOC": str(scratch / "batch.json"),
                }
                with uvicorn_server(bare_env, args.workers, log, BARE_APP) as bare:
                    check_bare(bare, work)
                    servers = {"service": service, "bare": bare}
                    for app, server in servers.items():  # warm-up, not counted
                        warm = asyncio.run(run_closed_loop(
                            HOST, server.port, work.requests, args.connections, 2.0,
                            max_requests=40_000, request_timeout_s=REQUEST_TIMEOUT_S,
                        ))  # fmt: skip
                        print(f"{app}: warm-up {warm.ok_per_s:.0f} 200/s", flush=True)
                    rounds = [
                        run_round(number, servers, work, args)
                        for number in range(1, args.rounds + 1)
                    ]
        except BaseException:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            print("uvicorn log (tail):\n" + tail, file=sys.stderr)
            raise
    text = report(rounds, work, args, time.monotonic() - started)
    write_report(args.output, text)
    print("\n".join(summary(rounds)))


if __name__ == "__main__":
    main()
