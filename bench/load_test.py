"""Open-loop load test of POST /v1/estimate on a real uvicorn server, SQLite and PostgreSQL.

    python bench/load_test.py [--postgres-url URL] [--step-s 60] [--rates 250,500,...]
                              [--workers 2] [--connections 64] [--output bench/results/load.md]

For each database: a fresh schema (SQLite: a temporary file; PostgreSQL: the URL's database,
migrated to head), `uvicorn service.main:app --loop uvloop --http httptools --workers N`, a
warm-up that sends every request body once, then one fixed-rate step per offered rate (see
load/open_loop.py: latency from each request's due time). Quotes are stored as in production.
Writes the Markdown report, a JSON of the raw step figures and a plot beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import uvloop
from load.bodies import encoded_post, estimate_body
from load.open_loop import StepResult, answering_requests, percentile, run_step
from load.report import P99_GOAL_S, ceiling_per_s, machine_line, plot, step_table
from load.server import (
    cpu_seconds,
    free_port,
    machine_busy_cpu_s,
    migrated_server_env,
    processes_named,
    uvicorn_server,
)
from report_file import command_line

DEFAULT_RATES = "50,100,200,400,700,1000,1500,2000"
STATIC_SERVER = Path(__file__).parent / "load" / "static_server.py"
HOST = "127.0.0.1"
UNREACHED_QUOTA_PER_S = 1_000_000


def request_pool(port: int, count: int, seed: int) -> list[bytes]:
    import urllib.request

    with urllib.request.urlopen(f"http://{HOST}:{port}/v1/models") as answer:
        known = {item["id"] for item in json.load(answer)["items"]}
    rng = random.Random(seed)
    host = f"{HOST}:{port}"
    return [encoded_post("/v1/estimate", estimate_body(rng, known), host) for _ in range(count)]


def measured_step(
    step: Coroutine[Any, Any, StepResult],
    server_cpu_s: Callable[[], float],
    database_cpu_s: Callable[[], float] = lambda: 0.0,
) -> StepResult:
    """Run `step` (a `run_step` coroutine) and fill in the CPU its server and database server
    used (`server_cpu_s`, `database_cpu_s` read before and after) and what the rest of the
    machine used meanwhile: busy time less server, database and generator."""
    server_before, database_before = server_cpu_s(), database_cpu_s()
    machine_before = machine_busy_cpu_s()
    result = asyncio.run(step)
    result.server_cpu_s = server_cpu_s() - server_before
    result.database_cpu_s = max(0.0, database_cpu_s() - database_before)
    machine_s = machine_busy_cpu_s() - machine_before
    result.other_cpu_s = max(
        0.0, machine_s - result.server_cpu_s - result.database_cpu_s - result.generator_cpu_s
    )
    return result


def postgres_cpu_s() -> float:
    """CPU time [s] of PostgreSQL's processes (those named `postgres`): the live ones', and
    the backends' that exited, which their parent, the postmaster, has reaped (its children's
    time: a backend that ends during a step counts its whole life, a small overcount)."""
    return cpu_seconds(processes_named("postgres"), with_reaped_children=True)


def busiest_share(after: dict[int, float], before: dict[int, float], workers: int) -> float:
    """The busiest worker's share of the `workers` busiest processes' CPU between two readings
    (a balanced pair of workers: 0.5)."""
    used = sorted((after[pid] - before.get(pid, 0.0) for pid in after), reverse=True)[:workers]
    return max(used) / sum(used) if used and sum(used) > 0 else float("nan")


def run_database(label: str, url: str, args: argparse.Namespace, log: Path) -> list[StepResult]:
    # One key offers the whole load: its per-process quota (1,000/s by default) would answer
    # 429 near 2,000/s. The limiter still runs, with a quota it never reaches.
    env = migrated_server_env(
        url, QUOTES_RATE_LIMITS=json.dumps({"estimate": UNREACHED_QUOTA_PER_S})
    )
    steps: list[StepResult] = []
    with uvicorn_server(env, args.workers, log) as server:
        candidates = request_pool(server.port, args.bodies, args.seed)
        requests, refused = asyncio.run(answering_requests(HOST, server.port, candidates))
        print(f"[{label}] {len(requests)} request bodies priced, {refused} refused (422)")
        warm = asyncio.run(run_step(HOST, server.port, requests, min(args.rates), 3.0, 16))
        print(f"[{label}] warm-up: {warm.ok} answered")
        for rate in args.rates:
            workers_before = server.worker_cpu_seconds()
            step = measured_step(
                run_step(HOST, server.port, requests, rate, args.step_s, args.connections),
                server.cpu_seconds,
                postgres_cpu_s if url.startswith("postgresql") else lambda: 0.0,
            )
            step.busiest_worker_share = busiest_share(
                server.worker_cpu_seconds(), workers_before, args.workers
            )
            steps.append(step)
            p99 = percentile(step.latencies_ok_s, 0.99) * 1000
            print(
                f"[{label}] {rate:g}/s: {step.achieved_per_s:.0f} ok/s, p99 {p99:.1f} ms, "
                f"shed {step.shed}, errors {step.errors}, unsent {step.unsent}, busiest worker "
                f"{100 * step.busiest_worker_share:.0f} %",
                flush=True,
            )
            time.sleep(args.pause_s)
    return steps


def generator_check(args: argparse.Namespace) -> list[StepResult]:
    """The generator against a static responder (load/static_server.py): the rates it can offer
    and its own CPU, with (almost) no server cost, i.e. the floor of what it measures."""
    port = free_port()
    responder = subprocess.Popen([sys.executable, str(STATIC_SERVER), str(port)])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the static responder did not start"
                time.sleep(0.1)
        body = {"model": "static", "workload": {"batch_size": 1}}
        requests = [encoded_post("/v1/estimate", body, f"{HOST}:{port}")]
        steps = []
        for rate in args.generator_check_rates:
            step = measured_step(
                run_step(HOST, port, requests, rate, min(args.step_s, 10.0), args.connections),
                lambda: cpu_seconds([responder.pid]),
            )
            steps.append(step)
            print(f"[generator check] {rate:g}/s: {step.achieved_per_s:.0f}/s answered, "
                  f"generator CPU {100 * step.generator_cpu_s / step.wall_s:.0f} %")  # fmt: skip
        return steps
    finally:
        responder.kill()
        responder.wait()


def write_report(
    results: dict[str, list[StepResult]], check: list[StepResult], args: argparse.Namespace
) -> None:
    output: Path = args.output
    plot_path = output.with_suffix(".png")
    plot(results, plot_path)
    lines = [
        "# Open-loop load test: POST /v1/estimate on uvicorn",
        "",
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC.",
        f"Machine: {machine_line()}.",
        f"Command: `{command_line({'$POSTGRES_URL': args.postgres_url})}`",
        "",
        f"Server: `uvicorn service.main:app --loop uvloop --http httptools --workers "
        f"{args.workers}`, default settings (learned regressor on, quotes stored, load shedding "
        "on, plain estimates answered on the hot path: in the event loop, quotes stored by "
        "group commit), the generator on the same machine. Requests are drawn in turn from "
        f"{args.bodies} seeded bodies (models, GPUs, counts, batch sizes, prompt and output "
        "lengths, regions and PUEs mixed as in `bench/load/bodies.py`), less those the service "
        "refuses (422: the model does not fit the GPUs); nothing caches whole answers, each "
        "workload is priced afresh. Each step offers a fixed rate for "
        f"{args.step_s:g} s with {args.connections} keep-alive connections; latency is counted "
        "from each request's due time on the fixed schedule, so requests delayed by a busy "
        "server are charged their wait. Percentiles are of the 200 answers; `shed` are 503 "
        "overloaded answers (Retry-After), `unsent` requests due that could not be sent before "
        "the drain deadline. Server CPU is that of uvicorn's processes per answered request, "
        "database CPU that of PostgreSQL's processes (SQLite runs inside the server). "
        "`rest of machine CPU %` is the CPU the machine spent meanwhile on anything but the "
        "server, the database and the generator (100 % = one core): more than a few per cent "
        "means a neighbour shared the two cores and the step understates the service. "
        "`busiest worker %` is the busiest worker's share of the workers' CPU (50 % with two "
        "workers is an even split). The generator opens its "
        "connections one at a time, each answering a first request before the next is opened "
        "(see `bench/load/open_loop.py`).",
        "",
    ]
    for database, steps in results.items():
        at_1000 = [step for step in steps if step.offered_per_s == 1000]
        p99_text = "1,000/s not offered"
        if at_1000:
            step = at_1000[0]
            p99_text = (
                f"At 1,000/s offered: {step.ok} of {step.scheduled} answered 200, p99 "
                f"{percentile(step.latencies_ok_s, 0.99) * 1000:.1f} ms (goal ≤ "
                f"{P99_GOAL_S * 1000:.0f} ms with all answered), {step.shed} shed"
            )
        lines += [
            f"## {database}",
            "",
            f"Sustained ceiling (highest step with ≥ 99 % answered 200, nothing shed or failed): "
            f"**{ceiling_per_s(steps):g} estimates/s** (goal ≥ 2,000). {p99_text}.",
            "",
            *step_table(steps),
            "",
        ]
    lines += [f"![latency percentiles vs offered rate]({plot_path.name})", ""]
    if check:
        lines += [
            "## The generator alone (static responder)",
            "",
            "The same generator and connection pool against `bench/load/static_server.py`, a "
            "uvloop responder answering every request with a fixed 200 at almost no cost: what "
            "the generator can offer on this machine, at what CPU of its own, and the latency "
            "floor it measures (the machine's scheduling noise included).",
            "",
            *step_table(check),
            "",
        ]
    output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    raw = {
        database: [
            {
                "offered_per_s": s.offered_per_s, "achieved_per_s": s.achieved_per_s,
                "ok": s.ok, "shed": s.shed, "errors": s.errors, "unsent": s.unsent,
                "error_kinds": dict(s.error_kinds),
                "p50_s": percentile(s.latencies_ok_s, 0.5),
                "p99_s": percentile(s.latencies_ok_s, 0.99),
                "p999_s": percentile(s.latencies_ok_s, 0.999),
                "server_cpu_s": s.server_cpu_s, "generator_cpu_s": s.generator_cpu_s,
                "database_cpu_s": s.database_cpu_s, "other_cpu_s": s.other_cpu_s,
                "busiest_worker_share": s.busiest_worker_share,
                "answered": len(s.latencies_all_s), "wall_s": s.wall_s,
            }
            for s in steps
        ]
        for database, steps in results.items()
    }  # fmt: skip
    output.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {output}, {plot_path.name}, {output.with_suffix('.json').name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres-url", help="SQLAlchemy URL of a PostgreSQL database")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--rates", default=DEFAULT_RATES, help="offered rates [req/s], CSV")
    parser.add_argument("--step-s", type=float, default=60.0, help="duration of each step [s]")
    parser.add_argument("--pause-s", type=float, default=2.0, help="pause between steps [s]")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--connections", type=int, default=256, help="keep-alive connections")
    parser.add_argument("--bodies", type=int, default=400, help="distinct request bodies")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--generator-check-rates", default="1000,2000,4000", help="rates offered to a static "
        "responder to show the generator's own capacity and CPU; empty to skip",
    )  # fmt: skip
    parser.add_argument("--output", type=Path, default=Path("bench/results/load.md"))
    args = parser.parse_args()
    args.rates = [float(rate) for rate in args.rates.split(",")]
    checks = args.generator_check_rates.split(",") if args.generator_check_rates else []
    args.generator_check_rates = [float(rate) for rate in checks]
    uvloop.install()
    results: dict[str, list[StepResult]] = {}
    check = generator_check(args)
    with tempfile.TemporaryDirectory(prefix="load-test-") as scratch:
        log = Path(scratch) / "uvicorn.log"
        if not args.skip_sqlite:
            url = f"sqlite:///{Path(scratch) / 'quotes.sqlite3'}"
            results["SQLite"] = run_database("SQLite", url, args, log)
        if args.postgres_url:
            results["PostgreSQL"] = run_database("PostgreSQL", args.postgres_url, args, log)
        print(log.read_text(errors="replace")[-3000:])
    write_report(results, check, args)


if __name__ == "__main__":
    main()
