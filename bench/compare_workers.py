"""Latency tail with one uvicorn worker against two, at one open-loop rate, SQLite.

    python bench/compare_workers.py [--rate 200] [--step-s 30] [--rounds 2]
                                    [--output bench/results/workers.md]

The load test (`load_test.py`) runs two workers, one per core. At rates one worker can carry,
its p99 on SQLite was several times the p50; this runs the same steps (same request pool and
generator, `load/open_loop.py`) against one worker and against two, alternating, on a fresh
SQLite database each, so the two layouts are compared under the same machine conditions.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import tempfile
from pathlib import Path

import uvloop
from load.open_loop import StepResult, answering_requests, percentile, run_step
from load.report import machine_line
from load.server import migrated_server_env, uvicorn_server
from load_test import HOST, request_pool
from report_file import command_line, write_report


def one_step(workers: int, args: argparse.Namespace) -> tuple[StepResult, float]:
    """A warm-up, then one timed step; the step and the server CPU [s] it used."""
    with tempfile.TemporaryDirectory(prefix="workers-") as scratch:
        env = migrated_server_env(f"sqlite:///{Path(scratch) / 'quotes.sqlite3'}")
        with uvicorn_server(env, workers, Path(scratch) / "uvicorn.log") as server:
            pool = request_pool(server.port, args.bodies, args.seed)
            requests, _ = asyncio.run(answering_requests(HOST, server.port, pool))
            asyncio.run(run_step(HOST, server.port, requests, 100, 3.0, 64))
            cpu_before = server.cpu_seconds()
            step = asyncio.run(
                run_step(HOST, server.port, requests, args.rate, args.step_s, args.connections)
            )
            return step, server.cpu_seconds() - cpu_before


def row(workers: int, step: StepResult, cpu_s: float) -> str:
    latencies = step.latencies_ok_s
    ms = [percentile(latencies, q) * 1000 for q in (0.5, 0.99, 0.999)]
    return (
        f"| {workers} | {step.ok} | {step.shed} | {ms[0]:.1f} | {ms[1]:.1f} | {ms[2]:.1f} | "
        f"{max(latencies) * 1000:.1f} | {cpu_s / max(step.ok, 1) * 1e6:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="offered estimates/s")
    parser.add_argument("--step-s", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of 1 and 2 workers")
    parser.add_argument("--connections", type=int, default=256)
    parser.add_argument("--bodies", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--postgres-url", help=argparse.SUPPRESS)  # for command_line only
    parser.add_argument("--output", type=Path, default=Path("bench/results/workers.md"))
    args = parser.parse_args()
    uvloop.install()
    rows = []
    for _ in range(args.rounds):
        for workers in (1, 2):
            step, cpu_s = one_step(workers, args)
            rows.append(row(workers, step, cpu_s))
            print(rows[-1], flush=True)
    lines = [
        "# Latency tail: one uvicorn worker against two (SQLite)",
        "",
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC.",
        f"Machine: {machine_line()}.",
        f"Command: `{command_line({'$POSTGRES_URL': args.postgres_url})}`",
        "",
        f"{args.rate:g} estimates/s offered open-loop for {args.step_s:g} s per row, "
        f"{args.connections} keep-alive connections, the generator on the same machine, a "
        "fresh SQLite database per row, default settings; rows alternate between the layouts. "
        "Latency from each request's due time; CPU is the server processes' per answered "
        "request.",
        "",
        "| workers | answered 200 | shed | p50 ms | p99 ms | p99.9 ms | max ms | CPU µs/req |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]
    write_report(args.output, "\n".join(lines))


if __name__ == "__main__":
    main()
