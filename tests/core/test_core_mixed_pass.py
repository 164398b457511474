"""One pricing pass holds workloads of many contexts (service.core.pass_plans): a dense model, a
mixture of experts, local/global sliding attention, a Mamba-2 hybrid and MLA, on different
GPUs, layouts and engines, interleaved. Each workload priced in that pass is priced exactly as
its context priced alone: times, energies, memory and every kernel's row, and the regressor's
features of it."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import load_engine_coefficients
from service.core.dtypes import DType
from service.core.estimate import estimate_contexts, estimate_request, pricing_context
from service.core.workload import Deployment, Parallelism, Precision, Workload
from service.pricing.regressor.features import request_features, workload_features

RTOL = 1e-12
BF16, FP8 = Precision(), Precision(DType.FP8, DType.FP8, DType.BF16)
CONTEXTS = [
    ("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB", Parallelism(), BF16, "vllm-v1"),
    (
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "A100-SXM4-80GB",
        Parallelism(tensor=4),
        BF16,
        "sglang",
    ),
    ("google/gemma-2-9b-it", "L40S", Parallelism(tensor=2), BF16, "vllm-v0"),
    ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", "H200-SXM-141GB", Parallelism(), BF16, "trtllm"),
    ("deepseek-ai/DeepSeek-V3", "H200-SXM-141GB", Parallelism(tensor=8), FP8, "vllm-v1"),
]
WORKLOADS = [
    Workload(1, 7, 1),
    Workload(8, 512, 256),
    Workload(3, 1300, 70, cached_prompt_tokens=1024),
    Workload(4, 900, 300, concurrent_sequences=64),
]


def contexts() -> list[tuple[object, Deployment, object]]:
    models, gpus, engines = load_model_catalog(), load_gpu_catalog(), load_engine_coefficients()
    return [
        (
            models.get(model).require_architecture(),
            Deployment(gpus.get(gpu).spec, parallelism, precision, True),
            engines[engine],
        )
        for model, gpu, parallelism, precision, engine in CONTEXTS
    ]


def test_each_workload_of_a_mixed_pass_is_priced_as_alone() -> None:
    cases = contexts()
    # Interleaved: context c's workloads w are numbered c * len(WORKLOADS) + w.
    groups = [
        (pricing_context(arch, dep, coefficients), WORKLOADS)  # type: ignore[arg-type]
        for arch, dep, coefficients in cases
    ]
    estimates, errors = estimate_contexts(groups)
    assert errors == {}
    assert estimates.plans.width % 8 == 0
    features = workload_features(estimates)
    for j, number in enumerate(estimates.positions):
        arch, dep, coefficients = cases[number // len(WORKLOADS)]
        workload = WORKLOADS[number % len(WORKLOADS)]
        alone = estimate_request(arch, workload, dep, coefficients)  # type: ignore[arg-type]
        mixed = estimates.item(j)
        assert mixed.total_s == pytest.approx(alone.total_s, rel=RTOL)
        assert mixed.gpu_j == pytest.approx(alone.gpu_j, rel=RTOL)
        assert mixed.memory == alone.memory
        assert mixed.warnings == alone.warnings
        for a, m in ((alone.prefill, mixed.prefill), (alone.decode, mixed.decode)):
            assert m.steps == a.steps
            assert_allclose(m.table.time_s, a.table.time_s, rtol=RTOL)
            assert_allclose(m.table.gpu_j, a.table.gpu_j, rtol=RTOL)
            assert_allclose(m.table.totals_matrix, a.table.totals_matrix, rtol=RTOL)
        one = request_features(arch, workload, dep, coefficients)  # type: ignore[arg-type]
        if workload.concurrent_sequences is None:  # request_features leaves memory unchecked
            item = features.item(j)
            assert_allclose(item.node_x, one.node_x, rtol=1e-10, atol=1e-12)
            assert_allclose(item.global_x, one.global_x, rtol=1e-10, atol=1e-12)
            np.testing.assert_array_equal(item.adjacency, one.adjacency)


def test_a_pass_pads_every_plan_to_one_width_of_zero_kernels() -> None:
    cases = contexts()
    groups = [
        (pricing_context(arch, dep, coefficients), WORKLOADS[:1])  # type: ignore[arg-type]
        for arch, dep, coefficients in cases
    ]
    estimates, _ = estimate_contexts(groups)
    plans = estimates.plans
    for j in range(estimates.count):
        kernels = len(plans.plan_of(j).nodes)
        assert kernels < plans.width  # at least the spare column
        for limb in (estimates.arrays.time_s, estimates.arrays.gpu_j):
            assert not limb[:, j, kernels:].any()


def test_a_context_whose_workloads_are_all_refused_takes_no_rows() -> None:
    """The pass's rows come context by context; a context left without rows has none (its
    members empty) and does not set the rows' flags (Gemma 2's sliding window here)."""
    dense, gemma = contexts()[0], contexts()[2]
    too_long = Workload(1, 10**7, 1)  # beyond any context length
    groups = [
        (pricing_context(*dense), WORKLOADS[:2]),  # type: ignore[arg-type]
        (pricing_context(*gemma), [too_long]),  # type: ignore[arg-type]
        (pricing_context(*dense), WORKLOADS[1:3]),  # type: ignore[arg-type]
    ]
    estimates, errors = estimate_contexts(groups)
    assert list(errors) == [2]
    assert estimates.positions == (0, 1, 3, 4)
    plans = estimates.plans
    assert [len(range(plans.count)[m]) for m in plans.members] == [2, 0, 2]
    assert [c for c, _ in plans.groups()] == [0, 2]
    assert plans.context.tolist() == [0, 0, 2, 2]
    assert not plans.rows.any_window
    arch, dep, coefficients = dense
    for j, workload in enumerate([*WORKLOADS[:2], *WORKLOADS[1:3]]):
        alone = estimate_request(arch, workload, dep, coefficients)  # type: ignore[arg-type]
        assert estimates.item(j).gpu_j == pytest.approx(alone.gpu_j, rel=RTOL)
        assert estimates.item(j).total_s == pytest.approx(alone.total_s, rel=RTOL)
