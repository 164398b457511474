"""How much slower the same memory-touching work runs right after the process slept: the
machine's share of a lightly loaded server's latency.

    python bench/cold_cache_probe.py [--repeat 150] [--output bench/results/cold_cache.md]

Gathers 200,000 random elements from arrays of 0.25, 2 and 8 MiB (`a[idx].sum()`), back to
back and with a 20 ms sleep before each run, and compares the medians; a tight loop that touches
almost no memory is the control. On a machine whose caches (and TLBs) stay warm while the
process sleeps the ratios are near 1. On a shared VM they are not, and every estimate of a
lightly loaded server (requests 20 ms apart at 50/s) starts cold: this is why
bench/results/load.md shows more server CPU per estimate at 50/s than at 1,000/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from report_file import opening, write_report

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "cold_cache.md"
GAP_S = 0.02
GATHERED = 200_000
WORKING_SETS_MIB = (0.25, 2.0, 8.0)


def median_us(work: Callable[[], object], repeat: int, gap_s: float) -> float:
    """Median wall time of `work` [µs] over `repeat` runs, sleeping `gap_s` before each."""
    samples = []
    for _ in range(repeat):
        if gap_s:
            time.sleep(gap_s)
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


def python_loop() -> int:
    """The control: interpreter work on a few cache lines."""
    total = 0
    for i in range(20_000):
        total += i * i
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=150)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases: list[tuple[str, Callable[[], object]]] = [("Python loop (control)", python_loop)]
    for mib in WORKING_SETS_MIB:
        values = np.ones(int(mib * 2**20 / 8))
        index = rng.integers(0, values.size, GATHERED)
        cases.append((f"gather from {mib:g} MiB", lambda v=values, i=index: v[i].sum()))
    rows = []
    for label, work in cases:
        median_us(work, 10, 0.0)  # warm-up
        warm = median_us(work, args.repeat, 0.0)
        slept = median_us(work, args.repeat, GAP_S)
        rows.append(f"| {label} | {warm:.0f} | {slept:.0f} | {slept / warm:.2f} |")
        print(rows[-1], flush=True)
    report = (
        opening("Cold caches after a sleep", f"; load average {os.getloadavg()[0]:.2f}")
        + f"- median of {args.repeat} runs each, back to back and with a {GAP_S * 1e3:.0f} ms "
        "sleep before each run (see the module docstring)\n\n"
        "| work | back to back [µs] | after a 20 ms sleep [µs] | ratio |\n"
        "|---|--:|--:|--:|\n" + "\n".join(rows) + "\n"
    )
    write_report(args.output, report)


if __name__ == "__main__":
    main()
