"""Where one estimate's CPU goes: each stage of `POST /v1/estimate` timed alone, the stages run
in sequence, and the whole request through the ASGI app; and what the regressor's ensemble
size costs.

    python bench/single_stages.py [--rounds 15] [--output bench/results/single_stages.md]

The same 100 seeded request bodies as bench_batch.py and bench/instruction_counts.py. Each
stage runs over all 100 bodies, `--rounds` times; the best round's mean per request is
reported (the fastest round is the one least disturbed by this shared VM's neighbours). A
stage's inputs are prepared beforehand, so a stage alone runs with its own code and data
warm in the caches. "In sequence" runs `Estimator.estimate` (every pricing stage, one request
after another) and the in-process POST runs the app's whole hot path (middleware, validation,
pricing, the quote committed to a fresh SQLite file, the answer). Running every stage of one
request before the next request's costs more than the stages alone, for the same work:
callgrind counts the same instructions in either order (`python bench/instruction_counts.py
--stages interleaved,staged`: the cost model and features, one request after another or each
stage over all requests), so the difference is how fast the CPU runs them, without the state
that repeated runs of one stage keep trained (caches, branch predictors); this VM exposes no
hardware counters to say which.

`price_batch(..., array_groups=False)` (what a busy worker does with the estimates that arrive
in one event-loop iteration, service/pricing_queue.py) runs each stage over a group of requests
before the next stage, every answer as if priced alone: its cost per request by group size
shows how much of that is recovered.

The last section times onnxruntime on the shipped model (10 members) and on the same graph
with only its first 5 members' weights (the ensemble's mean over fewer members): the speed side
of the ensemble-size trade-off; the accuracy side is the trained 5-member ablation in
models/energy_gnn_validation.md. That section needs the `onnx` package (the `train` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from bench_batch import items  # noqa: E402
from instruction_counts import _asgi_post, started_app  # noqa: E402
from report_file import opening, write_report  # noqa: E402

from service.batch_pricing import price_batch  # noqa: E402
from service.config import Settings  # noqa: E402
from service.core.estimate import estimate_request  # noqa: E402
from service.estimate_parts import Latency  # noqa: E402
from service.pricing.estimator import Estimator  # noqa: E402
from service.main import create_app  # noqa: E402
from service.quoting import request_fingerprint  # noqa: E402
from service.regressor.encoding import OUTPUT_NAMES, model_inputs  # noqa: E402
from service.regressor.runtime import DEFAULT_MODEL_PATH, EnergyRegressor  # noqa: E402
from service.schemas.estimate_request import EstimateRequest  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "single_stages.md"
BODIES = 100


Timed = tuple[str, Callable[[int], object], int]
"""(label, call, count): `call(i)` for i in range(count) is one pass."""


def interleaved_best_us(timed: Sequence[Timed], rounds: int) -> dict[str, float]:
    """Per label, the best of `rounds` passes per call [µs], the passes of every entry taken
    in turn round after round (a slow spell on the host slows every entry alike), after one
    warm-up pass each."""
    for _, call, count in timed:
        for i in range(count):
            call(i)
    best = {label: float("inf") for label, _, _ in timed}
    for _ in range(rounds):
        for label, call, count in timed:
            start = time.perf_counter()
            for i in range(count):
                call(i)
            best[label] = min(best[label], (time.perf_counter() - start) / count * 1e6)
    return best


SEQUENCE = "`Estimator.estimate`: the pricing stages one request after another"


def pricing_stages(estimator: Estimator, bodies: list[dict[str, Any]]) -> list[Timed]:
    """Each stage of an estimate alone, on inputs prepared beforehand, then SEQUENCE."""
    regressor = estimator.regressor
    assert regressor is not None
    raw = [json.dumps(body).encode() for body in bodies]
    requests = [EstimateRequest.model_validate_json(text) for text in raw]
    resolved = [estimator.resolve(request) for request in requests]
    coefficients = estimator.coefficients
    estimates = [
        estimate_request(r.architecture, r.workload, r.deployment, coefficients) for r in resolved
    ]
    features = [
        regressor.features(r.architecture, r.workload, r.deployment, coefficients, e)
        for r, e in zip(resolved, estimates, strict=True)
    ]
    inputs = [model_inputs([f], regressor.normalisation) for f in features]
    predictions = [regressor.predict(f) for f in features]
    names = list(OUTPUT_NAMES)
    session = regressor.session
    n = len(bodies)
    stages: list[tuple[str, Callable[[int], object]]] = [
        (
            "validate the JSON body (EstimateRequest)",
            lambda i: EstimateRequest.model_validate_json(raw[i]),
        ),
        (
            "resolve names and defaults (cached per context)",
            lambda i: estimator.resolve(requests[i]),
        ),
        (
            "cost model: `estimate_request`",
            lambda i: estimate_request(
                resolved[i].architecture, resolved[i].workload, resolved[i].deployment, coefficients
            ),
        ),
        (
            "regressor features (given the estimate)",
            lambda i: regressor.features(
                resolved[i].architecture,
                resolved[i].workload,
                resolved[i].deployment,
                coefficients,
                estimates[i],
            ),
        ),
        (
            "regressor inputs: `model_inputs`",
            lambda i: model_inputs([features[i]], regressor.normalisation),
        ),
        ("onnxruntime: one request", lambda i: session.run(names, inputs[i])),
        (
            "carbon and the response document: `Estimator.priced`",
            lambda i: estimator.priced(
                resolved[i], Latency.of(estimates[i]), predictions[i], None, None
            ),
        ),
        (
            "request fingerprint (stored with the quote)",
            lambda i: request_fingerprint(requests[i], False),
        ),
    ]
    stages.append((SEQUENCE, lambda i: estimator.estimate(requests[i])))
    return [(label, call, n) for label, call in stages]


def in_process_post_us(bodies: list[dict[str, Any]], rounds: int) -> float:
    """`POST /v1/estimate` through the whole ASGI app, quotes stored in a fresh SQLite file,
    one request at a time (rate limit off: this is not a limit test)."""

    async def run() -> float:
        with tempfile.TemporaryDirectory() as scratch:
            settings = Settings(
                database_url=f"sqlite:///{scratch}/quotes.sqlite3",
                run_migrations_on_start=True,
                log_level="WARNING",
                rate_limits={"estimate": 0},
            )
            app = create_app(settings)
            shut_down = await started_app(app)
            post = _asgi_post(app, "/v1/estimate")
            encoded = [json.dumps(body).encode() for body in bodies]
            for body in encoded:
                await post(body)
            best = float("inf")
            for _ in range(rounds):
                start = time.perf_counter()
                for body in encoded:
                    await post(body)
                best = min(best, time.perf_counter() - start)
            await shut_down()
            return best / len(encoded) * 1e6

    return asyncio.run(run())


GROUP_SIZES = (1, 2, 4, 8, 16)


def together_rows(
    estimator: Estimator, bodies: list[dict[str, Any]], rounds: int
) -> list[tuple[int, float]]:
    """(group size, µs per request) of `price_batch` without array groups over consecutive
    groups of the bodies."""
    requests = [EstimateRequest.model_validate(body) for body in bodies]
    timed: list[Timed] = []
    for size in GROUP_SIZES:
        groups = [requests[i : i + size] for i in range(0, len(requests) - size + 1, size)]

        def price(i: int, groups: list[list[EstimateRequest]] = groups) -> object:
            return price_batch(
                estimator, groups[i], verbose=False, calibration=None, array_groups=False
            )

        timed.append((str(size), price, len(groups)))
    best = interleaved_best_us(timed, rounds)
    return [(size, best[str(size)] / size) for size in GROUP_SIZES]


MEMBERS = (10, 5)


def members_model(path: Path, members: int) -> bytes:
    """The ONNX model at `path` with every member-axis weight cut to its first `members`."""
    model = onnx.load(str(path))
    for tensor in model.graph.initializer:
        array = onnx.numpy_helper.to_array(tensor)
        if array.ndim == 3:  # [members, in, out] weights and [members, 1, out] biases
            tensor.CopyFrom(
                onnx.numpy_helper.from_array(np.ascontiguousarray(array[:members]), tensor.name)
            )
    return model.SerializeToString()


def ensemble_rows(
    estimator: Estimator, bodies: list[dict[str, Any]], rounds: int
) -> list[tuple[int, float, float]]:
    """(members, µs for one request, µs per request in 64-request slices)."""
    regressor = estimator.regressor
    assert regressor is not None
    requests = [EstimateRequest.model_validate(body) for body in bodies]
    features = []
    for request in requests:
        r = estimator.resolve(request)
        features.append(
            regressor.features(r.architecture, r.workload, r.deployment, estimator.coefficients)
        )
    singles = [model_inputs([f], regressor.normalisation) for f in features]
    sixty_four = model_inputs((features * 2)[:64], regressor.normalisation)
    names = list(OUTPUT_NAMES)
    timed: list[Timed] = []
    for members in MEMBERS:
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        session = ort.InferenceSession(
            members_model(DEFAULT_MODEL_PATH, members), options, providers=["CPUExecutionProvider"]
        )
        run = session.run
        timed.append((f"{members} one", lambda i, run=run: run(names, singles[i]), len(singles)))
        timed.append((f"{members} slice", lambda i, run=run: run(names, sixty_four), 20))
    best = interleaved_best_us(timed, rounds)
    return [(m, best[f"{m} one"], best[f"{m} slice"] / 64) for m in MEMBERS]


def report(
    timed: dict[str, float],
    post_us: float,
    together: Sequence[tuple[int, float]],
    ensemble: Sequence[tuple[int, float, float]],
) -> str:
    sequence_us = timed.pop(SEQUENCE)
    stages = list(timed.items())
    pricing = [us for label, us in stages if "fingerprint" not in label and "validate" not in label]
    lines = [
        opening(
            "Where one estimate's CPU goes",
            f"; load average before the run {os.getloadavg()[0]:.2f}",
        ),
        f"- {BODIES} request bodies of bench_batch.py's mix; best of the rounds, mean per request "
        "(stages and the sequence timed in turn, round after round); "
        "wall-clock time of this one thread, onnxruntime on one thread",
        "",
        "## Stages alone",
        "",
        "| stage | µs per request |",
        "|---|--:|",
        *(f"| {label} | {us:.1f} |" for label, us in stages),
        "| **pricing stages alone, summed** (resolve to response document) "
        f"| **{sum(pricing):.1f}** |",
        "",
        "## In sequence",
        "",
        "| run | µs per request |",
        "|---|--:|",
        f"| {SEQUENCE} | {sequence_us:.1f} |",
        "| `POST /v1/estimate` through the ASGI app in process, quote stored (SQLite) "
        f"| {post_us:.1f} |",
        "",
        f"Pricing in sequence costs {sequence_us / sum(pricing):.2f}x the sum of its stages run "
        "alone: the same instructions (see the module docstring), run slower when each request "
        "goes through every stage before the next one starts.",
        "",
        "## Priced together, stage by stage",
        "",
        "`price_batch(..., array_groups=False)` over consecutive groups of the 100 requests "
        "(one onnxruntime pass per group; each answer as priced alone).",
        "",
        "| requests together | µs per request |",
        "|--:|--:|",
        *(f"| {size} | {us:.1f} |" for size, us in together),
        "",
        "## onnxruntime by ensemble size",
        "",
        "The shipped graph with all 10 members' weights, and with the first 5 members' only.",
        "",
        "| members | one request [µs] | per request in 64-request slices [µs] |",
        "|--:|--:|--:|",
        *(f"| {members} | {one:.1f} | {sliced:.1f} |" for members, one, sliced in ensemble),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)
    estimator = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    bodies = items(estimator, BODIES)
    timed = interleaved_best_us(pricing_stages(estimator, bodies), args.rounds)
    post = in_process_post_us(bodies, args.rounds)
    together = together_rows(estimator, bodies, args.rounds)
    ensemble = ensemble_rows(estimator, bodies, args.rounds)
    text = report(timed, post, together, ensemble)
    write_report(args.output, text)
    print(text)


if __name__ == "__main__":
    main()
