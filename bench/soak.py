"""Memory soak: RSS of one uvicorn worker under a steady open-loop estimate rate.

    python bench/soak.py [--minutes 10] [--rate 50] [--sample-s 5] [--postgres-url URL]
                         [--output bench/results/soak.md]

One worker (`--workers 1`, so the worker is the uvicorn process itself), SQLite in a temporary
file unless a PostgreSQL URL is given, quotes stored, learned regressor on. After a warm-up
(every request body priced once), RSS is sampled every `--sample-s` seconds while the load
runs; the report gives RSS at start and end and the least-squares slope of RSS over time
(MiB per hour), with a plot, so that a leak shows as a steady climb.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import tempfile
import threading
import time
from pathlib import Path

import uvloop
from load.open_loop import StepResult, answering_requests, percentile, run_step
from load.report import machine_line
from load.server import migrated_server_env, rss_bytes, uvicorn_server
from load_test import HOST, request_pool
from report_file import command_line

MIB = 1024 * 1024


def slope_per_hour(times_s: list[float], values: list[float]) -> float:
    """Least-squares slope of `values` over `times_s`, per hour."""
    count = len(times_s)
    mean_t, mean_v = sum(times_s) / count, sum(values) / count
    spread = sum((t - mean_t) ** 2 for t in times_s)
    if spread == 0:
        return 0.0
    covariance = sum((t - mean_t) * (v - mean_v) for t, v in zip(times_s, values, strict=True))
    return covariance / spread * 3600


def sample_rss(
    pid: int, every_s: float, stop: threading.Event, out: list[tuple[float, int]]
) -> None:
    started = time.monotonic()
    while not stop.is_set():
        out.append((time.monotonic() - started, rss_bytes(pid)))
        stop.wait(every_s)


def plot(samples: list[tuple[float, int]], path: Path, rate: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 3.8))
    axis.plot([t / 60 for t, _ in samples], [rss / MIB for _, rss in samples], marker=".")
    axis.set_xlabel("time under load [min]")
    axis.set_ylabel("worker RSS [MiB]")
    axis.set_title(f"One uvicorn worker at {rate:g} estimates/s")
    axis.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=50.0, help="offered estimates/s")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--postgres-url")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--output", type=Path, default=Path("bench/results/soak.md"))
    args = parser.parse_args()
    uvloop.install()
    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        url = args.postgres_url or f"sqlite:///{Path(scratch) / 'quotes.sqlite3'}"
        env = migrated_server_env(url)
        with uvicorn_server(env, 1, Path(scratch) / "uvicorn.log") as server:
            pid = server.worker_pids[0]
            loaded_rss = rss_bytes(pid)
            requests, _ = asyncio.run(
                answering_requests(HOST, server.port, request_pool(server.port, 400, 7))
            )
            samples: list[tuple[float, int]] = []
            stop = threading.Event()
            sampler = threading.Thread(target=sample_rss, args=(pid, args.sample_s, stop, samples))
            sampler.start()
            step: StepResult = asyncio.run(
                run_step(HOST, server.port, requests, args.rate, args.minutes * 60,
                         args.connections)
            )  # fmt: skip
            stop.set()
            sampler.join()
    write_report(args, loaded_rss, samples, step, url == args.postgres_url)


def write_report(
    args: argparse.Namespace,
    loaded_rss: int,
    samples: list[tuple[float, int]],
    step: StepResult,
    postgres: bool,
) -> None:
    times = [t for t, _ in samples]
    rss_mib = [rss / MIB for _, rss in samples]
    slope = slope_per_hour(times, rss_mib)
    half = len(samples) // 2
    late_slope = slope_per_hour(times[half:], rss_mib[half:]) if half > 1 else float("nan")
    plot_path = args.output.with_suffix(".png")
    plot(samples, plot_path, args.rate)
    args.postgres_url = args.postgres_url or ""
    lines = [
        "# Memory soak: RSS of one uvicorn worker under steady load",
        "",
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC.",
        f"Machine: {machine_line()}.",
        f"Command: `{command_line({'$POSTGRES_URL': args.postgres_url})}`",
        "",
        f"One worker (`uvicorn service.main:app --loop uvloop --http httptools --workers 1`), "
        f"{'PostgreSQL' if postgres else 'SQLite'}, quotes stored, learned regressor on; "
        f"{args.rate:g} estimates/s offered open-loop for {args.minutes:g} min with 400 distinct "
        f"request bodies; RSS sampled every {args.sample_s:g} s from /proc.",
        "",
        "| | value |",
        "|---|---:|",
        f"| RSS after start-up (catalogues, regressor loaded) | {loaded_rss / MIB:.1f} MiB |",
        f"| RSS at the first sample (after warm-up) | {rss_mib[0]:.1f} MiB |",
        f"| RSS at the last sample | {rss_mib[-1]:.1f} MiB |",
        f"| peak RSS | {max(rss_mib):.1f} MiB |",
        f"| slope over the whole run (least squares) | {slope:+.1f} MiB/h |",
        f"| slope over the second half | {late_slope:+.1f} MiB/h |",
        f"| requests answered 200 / scheduled | {step.ok} / {step.scheduled} |",
        f"| shed / errors | {step.shed} / {step.errors} |",
        f"| latency p50 / p99 (from due time) | {percentile(step.latencies_ok_s, 0.5) * 1000:.1f}"
        f" / {percentile(step.latencies_ok_s, 0.99) * 1000:.1f} ms |",
        "",
        f"![worker RSS over time]({plot_path.name})",
        "",
    ]
    args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
