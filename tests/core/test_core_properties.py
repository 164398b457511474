"""Properties of every estimate: monotone in the workload and the model, consistent totals."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from core_support import (
    IDEAL,
    REALISTIC,
    catalog_arch,
    catalog_gpu,
    deployment,
    estimate,
    total_tensor_flops,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from service.core.coefficients import CostModelCoefficients
from service.core.results import RequestEstimate
from service.core.workload import Workload

H100 = "H100-SXM5-80GB"
COEFFICIENTS = pytest.mark.parametrize("coefficients", [IDEAL, REALISTIC], ids=["ideal", "real"])
WORKLOADS = st.builds(
    Workload,
    batch_size=st.integers(1, 32),
    prompt_tokens=st.integers(1, 2048),
    output_tokens=st.integers(1, 512),
)
FEW = settings(max_examples=25, deadline=None)


def run(
    model: str, workload: Workload, coefficients: CostModelCoefficients, tensor: int = 1
) -> RequestEstimate:
    """`workload` on H100s; memory is not checked (the properties hold whether or not it fits)."""
    dep = deployment(catalog_gpu(H100), tensor=tensor)
    return estimate(
        catalog_arch(model),
        workload.batch_size,
        workload.prompt_tokens,
        workload.output_tokens,
        dep,
        coefficients,
        check_memory=False,
    )


@COEFFICIENTS
@FEW
@given(
    WORKLOADS,
    st.sampled_from(["batch_size", "prompt_tokens", "output_tokens"]),
    st.integers(1, 256),
)
def test_more_work_never_costs_less(
    coefficients: CostModelCoefficients, workload: Workload, field: str, extra: int
) -> None:
    bigger = dataclasses.replace(workload, **{field: getattr(workload, field) + extra})
    for model in ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-30B-A3B"):
        small, large = run(model, workload, coefficients), run(model, bigger, coefficients)
        assert small.gpu_j <= large.gpu_j
        assert small.total_s <= large.total_s


@COEFFICIENTS
@FEW
@given(WORKLOADS)
def test_bigger_models_cost_more(coefficients: CostModelCoefficients, workload: Workload) -> None:
    sizes = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B")
    results = [run(model, workload, coefficients) for model in sizes]
    assert [r.gpu_j for r in results] == sorted(r.gpu_j for r in results)
    assert [r.total_s for r in results] == sorted(r.total_s for r in results)


@COEFFICIENTS
@FEW
@given(WORKLOADS)
def test_tensor_parallelism_never_lowers_total_flops(
    coefficients: CostModelCoefficients, workload: Workload
) -> None:
    # 32 heads with 8 (Llama) and 4 (Qwen MoE) KV heads: TP 8 replicates Qwen's KV heads
    for model in ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B"):
        flops = [total_tensor_flops(run(model, workload, coefficients, tp)) for tp in (1, 2, 4, 8)]
        for fewer, more in itertools.pairwise(flops):
            assert more >= fewer * (1 - 1e-12)


@COEFFICIENTS
@FEW
@given(WORKLOADS, st.sampled_from([1, 2, 4]))
def test_totals_are_consistent(
    coefficients: CostModelCoefficients, workload: Workload, tensor: int
) -> None:
    result = run("Qwen/Qwen3-30B-A3B", workload, coefficients, tensor)
    assert_allclose(result.per_sequence_gpu_j * workload.batch_size, result.gpu_j, rtol=1e-12)
    assert_allclose(result.prefill.gpu_j + result.decode.gpu_j, result.gpu_j, rtol=1e-12)
    assert_allclose(result.prefill.time_s + result.decode.time_s, result.total_s, rtol=1e-12)
    kernels = [k for phase in (result.prefill, result.decode) for k in phase.kernels]
    assert all(k.time_s >= 0 and k.gpu_j >= 0 for k in kernels)
    assert result.decode.steps == workload.output_tokens - 1
