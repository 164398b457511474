"""How long the event loop's SQLite commits take, with and without the WAL checkpoint thread.

    python bench/commit_stalls.py [--requests 5000] [--output bench/results/commit_stalls.md]

`POST /v1/estimate` through the whole ASGI app in process, one request at a time (so each quote
is its own transaction, committed in the loop: a lone request is committed at once), on a fresh
SQLite file, twice: with `QUOTES_SQLITE_CHECKPOINT_INTERVAL_S=0` (SQLite checkpoints inside the
commit that takes the WAL past 1,000 pages) and with the default background checkpoints. Every
in-loop commit attempt is timed (`InLoopCommits.commit`); the table gives their distribution and
how much of the loop's time went to commits over 1 ms (a checkpoint's stall). Wall-clock: a busy
machine adds scheduling noise, so compare the two rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_batch import items  # noqa: E402
from instruction_counts import _asgi_post, started_app  # noqa: E402
from report_file import opening, write_report  # noqa: E402

from service.config import Settings  # noqa: E402
from service.db import in_loop_commit  # noqa: E402
from service.main import create_app  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "commit_stalls.md"
STALL_MS = 1.0


@contextmanager
def timed_commits() -> Iterator[list[float]]:
    """Durations [s] of every InLoopCommits.commit call made inside the block."""
    durations: list[float] = []
    original = in_loop_commit.InLoopCommits.commit

    def timed(self: Any, quotes: Any, oldest_queued_at: float) -> Any:
        started = time.perf_counter()
        try:
            return original(self, quotes, oldest_queued_at)
        finally:
            durations.append(time.perf_counter() - started)

    in_loop_commit.InLoopCommits.commit = timed  # type: ignore[method-assign]
    try:
        yield durations
    finally:
        in_loop_commit.InLoopCommits.commit = original  # type: ignore[method-assign]


async def post_requests(settings: Settings, count: int) -> None:
    app = create_app(settings)
    shut_down = await started_app(app)
    bodies = [json.dumps(body).encode() for body in items(app.state.services.estimator, 100)]
    post = _asgi_post(app, "/v1/estimate")
    for i in range(count):
        await post(bodies[i % len(bodies)])
    await shut_down()


def measured(interval_s: float, count: int) -> str:
    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings(
            database_url=f"sqlite:///{Path(scratch) / 'quotes.sqlite3'}",
            run_migrations_on_start=True,
            log_level="WARNING",
            rate_limits={"estimate": 0},  # 0: unlimited
            sqlite_checkpoint_interval_s=interval_s,
        )
        with timed_commits() as durations:
            asyncio.run(post_requests(settings, count))
    ms = np.array(durations) * 1000
    stalls = ms[ms > STALL_MS]
    label = "SQLite's own (0)" if interval_s == 0 else f"background thread ({interval_s:g} s)"
    row = (
        f"| {label} | {len(ms)} | {ms.mean():.3f} | {np.percentile(ms, 50):.3f} | "
        f"{np.percentile(ms, 99):.3f} | {np.percentile(ms, 99.9):.3f} | {ms.max():.2f} | "
        f"{len(stalls)} | {stalls.sum():.0f} | {ms.sum():.0f} |"
    )
    print(row, flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--interval-s", type=float, default=0.1, help="the thread's interval")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    rows = [measured(0.0, args.requests), measured(args.interval_s, args.requests)]
    report = (
        opening("In-loop SQLite commits: WAL checkpoints in the commit or in a thread")
        + f"- {args.requests} `POST /v1/estimate` in process, one at a time (one quote per "
        "transaction), fresh SQLite file per row; every in-loop commit attempt timed\n\n"
        "| checkpoints | commits | mean ms | p50 ms | p99 ms | p99.9 ms | max ms | "
        f"commits > {STALL_MS:g} ms | ms in them | ms in all commits |\n"
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n" + "\n".join(rows) + "\n"
    )
    write_report(args.output, report)


if __name__ == "__main__":
    main()
