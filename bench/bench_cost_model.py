"""CPU time of one analytical estimate (both phases, every kernel, no breakdown rows).

    python bench/bench_cost_model.py [--repeat N] [--warmup N] [--output PATH]

Each case is timed call by call with `time.process_time_ns` after a warm-up (so the cached plan of
the model on its deployment is built, as in a running service); the table of median and p90 CPU
time per call is printed and written, with the date, machine and command, to
bench/results/cost_model.md. The first call for a (model, deployment) also builds its plan: its
median over a few cold calls is reported beside.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's service package, not an installed one

from service.catalog import (  # noqa: E402
    load_cost_model_coefficients,
    load_gpu_catalog,
    load_model_catalog,
)
from service.core.coefficients import CostModelCoefficients  # noqa: E402
from service.core.dtypes import DType  # noqa: E402
from service.core.estimate import estimate_request  # noqa: E402
from service.core.plan import cost_plan  # noqa: E402
from service.core.workload import Deployment, Parallelism, Precision, Workload  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "cost_model.md"
BF16 = Precision()
FP8 = Precision(weights=DType.FP8, activations=DType.FP8, kv_cache=DType.BF16)


@dataclass(frozen=True)
class Case:
    label: str
    model: str
    gpu: str
    parallelism: Parallelism
    workload: Workload
    precision: Precision = BF16


CASES = (
    Case(
        "Llama-3.1-8B, 1xH100",
        "meta-llama/Llama-3.1-8B-Instruct",
        "H100-SXM5-80GB",
        Parallelism(),
        Workload(8, 512, 256),
    ),
    Case(
        "Llama-3.1-70B, TP4 H100",
        "meta-llama/Llama-3.1-70B-Instruct",
        "H100-SXM5-80GB",
        Parallelism(tensor=4),
        Workload(32, 512, 256),
    ),
    Case(
        "Mixtral-8x7B, TP2 H100",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "H100-SXM5-80GB",
        Parallelism(tensor=2),
        Workload(16, 512, 256),
    ),
    Case(
        "DeepSeek-V3 fp8, 8xH200",
        "deepseek-ai/DeepSeek-V3",
        "H200-SXM-141GB",
        Parallelism(tensor=8),
        Workload(16, 1024, 256),
        FP8,
    ),
    Case(
        "Gemma-2-9B sliding window, 1xH100",
        "google/gemma-2-9b-it",
        "H100-SXM5-80GB",
        Parallelism(),
        Workload(4, 6144, 512),
    ),
)


COLD_CALLS = 20


def time_case(
    case: Case, coefficients: CostModelCoefficients, repeat: int, warmup: int
) -> tuple[list[int], list[int]]:
    """CPU nanoseconds of `repeat` warm estimates of `case` (after `warmup` untimed ones), and of
    COLD_CALLS first calls (plan cache cleared before each)."""
    arch = load_model_catalog().get(case.model).require_architecture()
    gpu = load_gpu_catalog().get(case.gpu).spec
    deployment = Deployment(gpu, case.parallelism, case.precision)
    cold = []
    for _ in range(COLD_CALLS):
        cost_plan.cache_clear()
        start = time.process_time_ns()
        estimate_request(arch, case.workload, deployment, coefficients)
        cold.append(time.process_time_ns() - start)
    for _ in range(warmup):
        estimate_request(arch, case.workload, deployment, coefficients)
    samples = []
    for _ in range(repeat):
        start = time.process_time_ns()
        estimate_request(arch, case.workload, deployment, coefficients)
        samples.append(time.process_time_ns() - start)
    return samples, cold


def markdown_table(rows: list[tuple[Case, tuple[list[int], list[int]]]]) -> str:
    lines = [
        "| case | batch | prompt | output | median [µs] | p90 [µs] | first call [µs] |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for case, (samples, cold) in rows:
        p90 = statistics.quantiles(samples, n=10)[-1]
        w = case.workload
        lines.append(
            f"| {case.label} | {w.batch_size} | {w.prompt_tokens} | {w.output_tokens} "
            f"| {statistics.median(samples) / 1e3:.0f} | {p90 / 1e3:.0f} "
            f"| {statistics.median(cold) / 1e3:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000, help="timed calls per case")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls per case first")
    parser.add_argument("--output", type=Path, default=RESULTS, help="Markdown file to write")
    args = parser.parse_args()
    coefficients = load_cost_model_coefficients()
    load = os.getloadavg()
    rows = [(case, time_case(case, coefficients, args.repeat, args.warmup)) for case in CASES]
    table = markdown_table(rows)
    print(table)
    command = shlex.join(["python", *sys.argv])
    report = (
        "# Cost-model benchmark: CPU time per analytical estimate\n\n"
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}\n"
        f"- machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; load average before the "
        f"run {load[0]:.2f}\n"
        f"- command: `{command}`\n"
        f"- coefficients: {coefficients.version}\n"
        f"- {args.repeat} timed calls per case after {args.warmup} warm-up calls; "
        "`time.process_time_ns` per call; both phases, every kernel, no breakdown rows\n\n"
        f"{table}\n"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
