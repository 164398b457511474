"""CPU time of the learned energy regressor per request, and the size of its ONNX file.

    .venv/bin/python bench/bench_regressor.py            # writes bench/results/regressor.md

Measures, on one thread (onnxruntime intra/inter-op threads 1, as the service runs it), the
thread CPU time of: one onnxruntime inference (`session.run` on one request's inputs, the
issue's <= 100 µs target), the encoding of features into input tensors, a whole
`EnergyRegressor.predict`, and building the features (analytical estimate included).

Each step is timed in ROUNDS rounds of calls after a warm-up; the table gives the median over
all calls, the median of the quietest round (as `timeit` keeps the best repeat: on a shared
machine other tenants slow whole stretches of calls) and the 90th percentile over all calls.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.catalog import load_engine_coefficients, load_gpu_catalog, load_model_catalog  # noqa: E402
from service.core.architecture import ModelArchitecture  # noqa: E402
from service.core.coefficients import CostModelCoefficients  # noqa: E402
from service.core.dtypes import DType  # noqa: E402
from service.core.estimate import estimate_workloads  # noqa: E402
from service.core.workload import Deployment, Parallelism, Precision, Workload  # noqa: E402
from service.pricing.regressor.encoding import model_inputs, output_names  # noqa: E402
from service.pricing.regressor.features import Features, workload_features  # noqa: E402
from service.pricing.regressor.runtime import (  # noqa: E402
    DEFAULT_METADATA_PATH,
    DEFAULT_MODEL_PATH,
    EnergyRegressor,
)

TARGET_US = 100.0
ROUNDS = 5
RESULTS = ROOT / "bench" / "results" / "regressor.md"
CASES = (
    ("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB", Parallelism(tensor=2), DType.BF16),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "A100-SXM4-80GB", Parallelism(tensor=4), DType.BF16),
    (
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        "H100-SXM5-80GB",
        Parallelism(tensor=1, expert=8),
        DType.FP8,
    ),
)


def thread_cpu_us(
    call: Callable[[], object], repeats: int, warmup: int
) -> tuple[float, float, float]:
    """The calling thread's CPU time per call [µs]: median over all calls, median of the
    quietest of ROUNDS rounds, 90th percentile over all calls."""
    for _ in range(warmup):
        call()
    rounds = []
    for _ in range(ROUNDS):
        samples = []
        for _ in range(max(repeats // ROUNDS, 1)):
            start = time.thread_time_ns()
            call()
            samples.append((time.thread_time_ns() - start) / 1e3)
        rounds.append(samples)
    every = [s for r in rounds for s in r]
    best = min(statistics.median(r) for r in rounds)
    return statistics.median(every), best, float(np.quantile(every, 0.9))


def case_inputs(
    model_id: str, gpu_id: str, par: Parallelism, weights: DType
) -> tuple[ModelArchitecture, Workload, Deployment, CostModelCoefficients]:
    arch = load_model_catalog().get(model_id).require_architecture()
    activations = DType.FP8 if weights is DType.FP8 else DType.BF16
    deployment = Deployment(
        load_gpu_catalog().get(gpu_id).spec, par, Precision(weights, activations, DType.BF16)
    )
    workload = Workload(batch_size=8, prompt_tokens=512, output_tokens=256)
    return arch, workload, deployment, load_engine_coefficients()["vllm-v1"]


def case_features(model_id: str, gpu_id: str, par: Parallelism, weights: DType) -> Features:
    """One request's features, its analytical estimate included (a group of one)."""
    arch, workload, deployment, coefficients = case_inputs(model_id, gpu_id, par, weights)
    estimates, _ = estimate_workloads(arch, [workload], deployment, coefficients)
    return workload_features(estimates)


def features_from_estimate(
    inputs: tuple[ModelArchitecture, Workload, Deployment, CostModelCoefficients], repeats: int
) -> tuple[float, float, float]:
    """CPU time of the features alone given the analytical estimate, as the estimator runs them
    (it has the estimate already, for latency)."""
    arch, workload, deployment, coefficients = inputs
    estimates, _ = estimate_workloads(arch, [workload], deployment, coefficients)
    return thread_cpu_us(lambda: workload_features(estimates), repeats, 500)


def share_of_an_estimate(
    regressor: EnergyRegressor,
    inputs: tuple[ModelArchitecture, Workload, Deployment, CostModelCoefficients],
    repeats: int,
) -> tuple[float, float, float]:
    """CPU time the regressor adds to an estimate: features from the analytical estimate, then
    predict (encode + run + predictions), as the estimator calls them."""
    arch, workload, deployment, coefficients = inputs
    estimates, _ = estimate_workloads(arch, [workload], deployment, coefficients)
    return thread_cpu_us(lambda: regressor.predict(workload_features(estimates)), repeats, 500)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    regressor = EnergyRegressor.load(DEFAULT_MODEL_PATH, DEFAULT_METADATA_PATH, 1, 1)
    session = regressor.session
    outputs = list(output_names(regressor.time_head))  # the time head's too, as served
    size = DEFAULT_MODEL_PATH.stat().st_size
    rows = []
    for model_id, gpu_id, par, weights in CASES:
        features = case_features(model_id, gpu_id, par, weights)
        inputs = model_inputs(features, regressor.normalisation)
        arch = load_model_catalog().get(model_id).require_architecture()
        timings = {
            "onnxruntime run": thread_cpu_us(
                lambda i=inputs: session.run(outputs, i), args.repeats, 500
            ),
            "encode inputs": thread_cpu_us(
                lambda f=features: model_inputs(f, regressor.normalisation), args.repeats, 500
            ),
            "predict (encode + run)": thread_cpu_us(
                lambda f=features: regressor.predict(f), args.repeats, 500
            ),
            "features (estimate + encode graph)": thread_cpu_us(
                lambda m=model_id, g=gpu_id, p=par, w=weights: case_features(m, g, p, w),
                max(args.repeats // 10, 50),
                20,
            ),
            "features from the estimate (as served)": features_from_estimate(
                case_inputs(model_id, gpu_id, par, weights), args.repeats
            ),
            "features from the estimate + predict (the regressor's share)": share_of_an_estimate(
                regressor, case_inputs(model_id, gpu_id, par, weights), args.repeats
            ),
        }
        (adjacency,) = features.adjacency  # one request: one graph
        nodes = adjacency.shape[0]
        for what, (median, best, p90) in timings.items():
            rows.append(
                f"| {model_id} ({nodes} nodes, {arch.num_layers} layers) | {what} | "
                f"{median:.1f} | {best:.1f} | {p90:.1f} |"
            )
    run_medians = [float(r.split("|")[3]) for r in rows if "| onnxruntime run |" in r]
    best_medians = [float(r.split("|")[4]) for r in rows if "| onnxruntime run |" in r]
    verdict = "meets" if max(run_medians) <= TARGET_US else "misses"
    finished = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    lines = [
        "# Learned energy regressor: CPU time per request",
        "",
        "Made by `.venv/bin/python bench/bench_regressor.py` "
        f"({args.repeats} timed calls after warm-up; thread CPU time, one onnxruntime thread). "
        f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, Python "
        f"{platform.python_version()}, onnxruntime {ort.__version__}; {os.cpu_count()} CPUs shared "
        f"with other work, load average {load:.2f} before the run; {finished} UTC.",
        "",
        f"Model `{regressor.version}`: ONNX file {size / 1024:.0f} KiB (limit 1 MB). One "
        f"onnxruntime inference: median over all calls {max(run_medians):.1f} µs at worst over "
        f"the cases, which {verdict} the <= {TARGET_US:.0f} µs target (quietest round: "
        f"{max(best_medians):.1f} µs).",
        "",
        "| request (workload: batch 8, prompt 512, output 256) | step | median µs | "
        "quietest-round median µs | p90 µs |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
