"""The plan-based estimate (one request, or many at once) against a straightforward reference.

The reference prices every kernel from its counter (service.core.kernel_work) pass by pass:
prefill once, then every decode step at its own context, each unit's time from
roofline.unit_times_s, the kernel's time the largest unit's plus a launch, summed step by step
with no plan, no basis terms and no closed-form envelope. Energy is applied to the phase totals as
the model defines it. Catalogue models cover GQA, MoE (expert GEMMs), MLA, sliding windows,
unfused attention, tensor/pipeline/expert parallelism and a request with one output token.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from numpy.testing import assert_allclose

from service.catalog import load_cost_model_coefficients, load_gpu_catalog, load_model_catalog
from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import InsufficientMemory, InvalidWorkload
from service.core.counts import AttentionSpan, PassShape
from service.core.dtypes import DType, gemm_compute_key
from service.core.estimate import estimate_request, estimate_workloads
from service.core.graph import build_kernel_graph
from service.core.kernel_work import kernel_work
from service.core.moe import expert_load_imbalance
from service.core.results import RequestEstimate
from service.core.roofline import STREAMING_KINDS, unit_rates, unit_times_s
from service.core.shards import shard_shapes
from service.core.workload import Deployment, Parallelism, Precision, Workload

COEFFICIENTS = load_cost_model_coefficients()
FP8 = Precision(weights=DType.FP8, activations=DType.FP8, kv_cache=DType.BF16)
CASES = [
    ("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB", Parallelism(), Precision(), True),
    (
        "meta-llama/Llama-3.1-8B-Instruct",
        "A100-SXM4-80GB",
        Parallelism(tensor=2),
        Precision(),
        False,
    ),
    (
        "meta-llama/Llama-3.1-70B-Instruct",
        "H100-SXM5-80GB",
        Parallelism(2, 1, 2),
        Precision(),
        True,
    ),
    (
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "H100-SXM5-80GB",
        Parallelism(tensor=2),
        Precision(),
        True,
    ),
    ("Qwen/Qwen3-30B-A3B", "H100-SXM5-80GB", Parallelism(tensor=1, expert=4), Precision(), True),
    ("deepseek-ai/DeepSeek-V3", "H200-SXM-141GB", Parallelism(tensor=8), FP8, True),
    ("google/gemma-2-9b-it", "H100-SXM5-80GB", Parallelism(), Precision(), True),
    ("google/gemma-2-9b-it", "L40S", Parallelism(tensor=2), Precision(), False),
    ("openai/gpt-oss-20b", "H100-SXM5-80GB", Parallelism(tensor=2), Precision(), True),
]
# Batches, prompts and outputs across the GEMM tile (64), the sliding windows (128, 4096) and
# output 1 (no decode step).
WORKLOADS = [
    Workload(1, 7, 1),
    Workload(1, 100, 40),
    Workload(3, 120, 20),
    Workload(8, 4090, 12),
    Workload(65, 33, 9),
    Workload(16, 512, 1),
]
RTOL = 1e-9


def deployment_of(
    gpu: str, parallelism: Parallelism, precision: Precision, flash: bool
) -> Deployment:
    return Deployment(load_gpu_catalog().get(gpu).spec, parallelism, precision, flash)


def prefill_spans(arch: ModelArchitecture, prompt: int, flash: bool) -> dict[str, AttentionSpan]:
    """Pairs per sequence: causal (flash) or the square (unfused); a window caps each row."""
    full = sum(range(1, prompt + 1)) if flash else prompt * prompt
    spans = {"full": AttentionSpan(float(full), prompt, prompt)}
    window = arch.sliding_window_tokens
    if window is not None:
        rows = sum(min(i, window) for i in range(1, prompt + 1)) if flash else prompt * prompt
        spans["sliding"] = AttentionSpan(float(rows), prompt, prompt)
    return spans


def reference(
    arch: ModelArchitecture, w: Workload, dep: Deployment, c: CostModelCoefficients
) -> dict[str, np.ndarray]:
    """[2, kernels] time, compute, memory, network [s] and GPU energy [J] of each phase."""
    par, roofline = dep.parallelism, c.roofline
    imbalance = expert_load_imbalance(par.expert, roofline.expert_imbalance_per_doubling)
    shapes = replace(shard_shapes(arch, dep), expert_imbalance=imbalance)
    graph = build_kernel_graph(
        arch,
        flash_attention=dep.flash_attention,
        tensor_group=par.gpus_per_stage,
        pipeline_stages=par.pipeline,
        expert_group=par.expert if par.data > 1 else 1,  # all-to-all only under attention DP
    )
    nodes = graph.nodes + graph.step_nodes
    rates = unit_rates(
        dep.gpu, gemm_compute_key(dep.precision.weights, dep.precision.activations), roofline
    )
    b, p = w.batch_size, w.prompt_tokens
    prefill = PassShape(
        float(b * p), b, b, prefill_spans(arch, p, dep.flash_attention), roofline.gemm_tile_m
    )
    passes = [[(prefill, roofline.kernel_launch_s)], []]
    window = arch.sliding_window_tokens or 10**9
    for context in range(p + 1, p + w.output_tokens):
        spans = {
            "decode": AttentionSpan(context, context, 1.0),  # decoding sequences' full span
            "sliding": AttentionSpan(min(context, window), min(context, window), 1.0),
        }
        step = PassShape(float(b), b, b, spans, roofline.gemm_tile_m)
        passes[1].append((step, roofline.decode_kernel_launch_s))
    out = {k: np.zeros((2, len(nodes))) for k in ("time", "compute", "memory", "network")}
    for phase, shapes_of_phase in enumerate(passes):
        for i, node in enumerate(nodes):
            for shape, launch in shapes_of_phase:
                work = kernel_work(node, arch, shapes, shape)
                units = unit_times_s(work, rates, streaming=node.kind in STREAMING_KINDS)
                out["time"][phase, i] += (max(units) + launch) * node.layers
                out["compute"][phase, i] += max(units[:3]) * node.layers
                out["memory"][phase, i] += units[3] * node.layers
                # the network limb is link-busy time: bytes / rate, step latency excluded
                out["network"][phase, i] += (
                    work.network_bytes / rates.network_bytes_per_s * node.layers
                )
    power, gpu = c.power, dep.gpu
    share = (
        power.compute * out["compute"]
        + power.memory * out["memory"]
        + power.network * out["network"]
    )
    dynamic = (gpu.tdp_w - gpu.idle_w) * np.minimum(share, out["time"])
    out["gpu_j"] = shapes.group * (gpu.idle_w * out["time"] + dynamic)
    return out


def assert_matches_reference(e: RequestEstimate, ref: dict[str, np.ndarray]) -> None:
    for phase, cost in enumerate((e.prefill, e.decode)):
        table = cost.table
        assert_allclose(table.time_s, ref["time"][phase], rtol=RTOL, atol=0.0)
        assert_allclose(table.compute_s, ref["compute"][phase], rtol=RTOL, atol=0.0)
        assert_allclose(table.memory_s, ref["memory"][phase], rtol=RTOL, atol=0.0)
        assert_allclose(table.network_s, ref["network"][phase], rtol=RTOL, atol=0.0)
        assert_allclose(table.gpu_j, ref["gpu_j"][phase], rtol=RTOL, atol=0.0)
        assert_allclose(table.kernel_time_s, ref["time"][phase].sum(), rtol=RTOL)
        assert_allclose(table.kernel_gpu_j, ref["gpu_j"][phase].sum(), rtol=RTOL)


def assert_same(a: RequestEstimate, b: RequestEstimate) -> None:
    for x, y in ((a.prefill, b.prefill), (a.decode, b.decode)):
        for name in ("time_s", "gpu_j", "overhead_s"):
            assert_allclose(getattr(x, name), getattr(y, name), rtol=RTOL)
        assert x.steps == y.steps
        for name in ("time_s", "gpu_j", "compute_s", "memory_s", "network_s", "executions"):
            assert_allclose(getattr(x.table, name), getattr(y.table, name), rtol=RTOL, atol=0.0)
        assert_allclose(x.table.totals_matrix, y.table.totals_matrix, rtol=RTOL, atol=0.0)
        assert [k.bound for k in x.kernels] == [k.bound for k in y.kernels]
    for name in ("gpu_j", "total_s", "time_per_output_token_s"):
        assert_allclose(getattr(a, name), getattr(b, name), rtol=RTOL)
    assert (a.batch_size, a.gpu_count, a.memory, a.warnings) == (
        b.batch_size,
        b.gpu_count,
        b.memory,
        b.warnings,
    )


@pytest.mark.parametrize(("model", "gpu", "parallelism", "precision", "flash"), CASES)
def test_single_and_batch_estimates_equal_the_step_by_step_reference(
    model: str, gpu: str, parallelism: Parallelism, precision: Precision, flash: bool
) -> None:
    arch = load_model_catalog().get(model).require_architecture()
    dep = deployment_of(gpu, parallelism, precision, flash)
    batch, errors = estimate_workloads(arch, WORKLOADS, dep, COEFFICIENTS, check_memory=False)
    assert errors == {}
    assert batch.positions == tuple(range(len(WORKLOADS)))
    totals = batch.totals()
    for j, workload in enumerate(WORKLOADS):
        single = estimate_request(arch, workload, dep, COEFFICIENTS, check_memory=False)
        assert_matches_reference(single, reference(arch, workload, dep, COEFFICIENTS))
        many = batch.item(j)
        assert_same(single, many)
        for phase, cost in enumerate((single.prefill, single.decode)):
            kernels = len(cost.table.nodes)  # the rest is the pass's padding: all zero
            assert_allclose(
                totals[phase, j, :kernels], cost.table.totals_matrix, rtol=RTOL, atol=0.0
            )
            assert not totals[phase, j, kernels:].any()
        assert_allclose(batch.gpu_j[j], single.gpu_j, rtol=RTOL)


def test_batch_reports_each_invalid_or_oversized_workload_at_its_index() -> None:
    arch = load_model_catalog().get("meta-llama/Llama-3.1-70B-Instruct").require_architecture()
    dep = deployment_of("H100-SXM5-80GB", Parallelism(tensor=2), Precision(), True)
    workloads = [
        Workload(4, 512, 128),
        Workload(0, 512, 128),  # empty batch
        Workload(1, 200_000, 10),  # beyond the context length
        Workload(1, 120_000, 8_000),  # one sequence's KV cache does not fit on 2 GPUs
        Workload(1, 64, 1),
    ]
    batch, errors = estimate_workloads(arch, workloads, dep, COEFFICIENTS)
    assert sorted(errors) == [1, 2, 3]
    assert isinstance(errors[1], InvalidWorkload) and isinstance(errors[2], InvalidWorkload)
    assert isinstance(errors[3], InsufficientMemory)
    for index, error in errors.items():
        with pytest.raises(type(error)) as raised:
            estimate_request(arch, workloads[index], dep, COEFFICIENTS)
        assert raised.value.message == error.message
    assert batch.positions == (0, 3, 4)  # priced before the memory check
    for j, index in ((0, 0), (2, 4)):
        assert_same(batch.item(j), estimate_request(arch, workloads[index], dep, COEFFICIENTS))
