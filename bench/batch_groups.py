"""Batch pricing by group size: where the cost model's array form starts to pay, and a batch of
mixed deployments (bench_batch.py's "Small groups" section).

`price_batch` evaluates a model-and-deployment group with the array form of the cost model
(`estimate_requests` + `batch_features`) only from `MIN_VECTOR_GROUP` requests on; smaller groups
go one by one (`estimate_request` + `request_features`). This measures both forms on one
deployment for groups of 1 to 32 workloads, and `price_batch` against `Estimator.estimate` on a
batch drawn from the load test's gateway mix (8 models x 6 GPUs x 5 GPU counts, so groups of one
or two), where the array form was slower than single estimates before the threshold.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

from load.bodies import estimate_body

from service.batch_pricing import MIN_VECTOR_GROUP, price_batch
from service.core.estimate import estimate_request, estimate_requests
from service.core.workload import Workload
from service.errors import ServiceError
from service.pricing.estimator import Estimator
from service.regressor.batch_features import batch_features
from service.regressor.features import request_features
from service.schemas.estimate_request import EstimateRequest

GROUP_SIZES = (1, 2, 3, 4, 8, 16, 32)
ONE_DEPLOYMENT = {
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "workload": {"batch_size": 8, "prompt_tokens": 600, "output_tokens": 200},
    "hardware": {"gpu": "H100-SXM5-80GB", "count": 4},
}


def best_s(call: Callable[[], object], repeat: int) -> float:
    call()  # warm-up: plans and graphs built
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return min(samples)


def mixed_requests(estimator: Estimator, count: int, seed: int = 3) -> list[EstimateRequest]:
    """`count` requests of the load test's gateway mix that the service prices (not 422)."""
    rng = random.Random(seed)
    known = set(estimator.models.ids)
    requests: list[EstimateRequest] = []
    while len(requests) < count:
        request = EstimateRequest.model_validate(estimate_body(rng, known))
        try:
            estimator.estimate(request)
        except ServiceError:
            continue
        requests.append(request)
    return requests


def group_size_rows(estimator: Estimator, repeat: int) -> list[str]:
    """Cost model + regressor features per request, one by one against the array form."""
    resolved = estimator.resolve(EstimateRequest.model_validate(ONE_DEPLOYMENT))
    arch, deployment = resolved.architecture, resolved.deployment
    coefficients = estimator.engine_coefficients[resolved.engine]
    rng = random.Random(1)
    rows = []
    for size in GROUP_SIZES:
        workloads = [
            Workload(rng.choice((1, 4, 16)), rng.randint(50, 3000), rng.randint(2, 800))
            for _ in range(size)
        ]

        def one_by_one(workloads: list[Workload] = workloads) -> None:
            for workload in workloads:
                estimate = estimate_request(arch, workload, deployment, coefficients)
                request_features(arch, workload, deployment, coefficients, estimate)

        def array_form(workloads: list[Workload] = workloads) -> None:
            estimates, _ = estimate_requests(arch, workloads, deployment, coefficients)
            batch_features(arch, deployment, estimates)

        single_us = best_s(one_by_one, repeat) / size * 1e6
        array_us = best_s(array_form, repeat) / size * 1e6
        chosen = "array" if size >= MIN_VECTOR_GROUP else "one by one"
        rows.append(f"| {size} | {single_us:.0f} | {array_us:.0f} | {chosen} |")
    return rows


def small_groups_section(estimator: Estimator, items: int, repeat: int) -> str:
    requests = mixed_requests(estimator, items)
    contexts = {(r.architecture, r.deployment) for r in map(estimator.resolve, requests)}
    batch_s = [
        best_s(lambda: price_batch(estimator, requests, verbose=False, calibration=None), 1)
        for _ in range(repeat)
    ]
    single_s = [best_s(lambda: [estimator.estimate(r) for r in requests], 1) for _ in range(repeat)]
    table: list[str] = [
        "| group size | one by one [µs per request] | array form [µs per request] "
        "| price_batch uses |",
        "|--:|--:|--:|---|",
        *group_size_rows(estimator, 3 * repeat),
    ]
    mixed: list[str] = [
        "| pricing | median [ms] | µs per item |",
        "|---|--:|--:|",
        _mixed_row("`price_batch`", batch_s, items),
        _mixed_row("`Estimator.estimate` per item", single_s, items),
    ]
    return (
        "## Small groups\n\n"
        "Cost model and regressor features (no onnxruntime, carbon or documents) for groups of "
        f"workloads of `{ONE_DEPLOYMENT['model']}` on 4 x H100, best of {3 * repeat}: "
        f"`price_batch` uses the array form from {MIN_VECTOR_GROUP} requests of one "
        "model and deployment on (`MIN_VECTOR_GROUP`).\n\n"
        + "\n".join(table)
        + f"\n\nA {items}-item batch of the load test's gateway mix (`bench/load/bodies.py`, "
        f"{len(contexts)} distinct models on deployments), median of {repeat}:\n\n"
        + "\n".join(mixed)
        + "\n"
    )


def _mixed_row(label: str, samples: list[float], items: int) -> str:
    median = statistics.median(samples)
    return f"| {label} | {median * 1e3:.1f} | {median / items * 1e6:.1f} |"
