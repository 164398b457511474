"""Expert parallelism's all-to-all dispatch and combine, against bytes worked out by hand."""

from __future__ import annotations

import dataclasses

import pytest
from numpy.testing import assert_allclose

from service.core.coefficients import CostModelCoefficients
from service.core.counts import expert_all_to_all_work
from service.core.estimate import estimate_request
from service.core.graph import build_kernel_graph
from service.core.moe import expert_load_imbalance
from service.core.shards import shard_shapes
from service.core.workload import Deployment, Parallelism, Precision, Workload
from tests.core.core_support import IDEAL, catalog_arch, catalog_gpu, deployment

QWEN3_30B = "Qwen/Qwen3-30B-A3B"  # hidden 2048, 128 experts, top-8
MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"  # hidden 4096, 8 experts, top-2, 32 layers
H100 = "H100-SXM5-80GB"


def _with_imbalance(per_doubling: float) -> CostModelCoefficients:
    roofline = dataclasses.replace(IDEAL.roofline, expert_imbalance_per_doubling=per_doubling)
    return dataclasses.replace(IDEAL, roofline=roofline)


def test_all_to_all_bytes_for_ep4_top8() -> None:
    # 1000 tokens over 4 GPUs (tensor 1 x expert 4): 250 each, x 8 experts = 2000 rows of
    # 2048 bf16 elements = 8,192,000 B, of which 3/4 go to other GPUs: 6,144,000 B per
    # direction; the most loaded rank at 1 + 0.1 x log2(4) = 1.2 times that: 7,372,800 B.
    arch = catalog_arch(QWEN3_30B)
    shapes = shard_shapes(arch, deployment(catalog_gpu(H100), expert=4))
    even = expert_all_to_all_work(1000.0, arch, shapes)
    assert_allclose(even.network_bytes, 6_144_000.0, rtol=1e-12)
    assert_allclose(even.activation_read_bytes, 8_192_000.0, rtol=1e-12)
    assert even.collective_steps == 1.0
    skewed = dataclasses.replace(shapes, expert_imbalance=expert_load_imbalance(4, 0.1))
    assert_allclose(expert_all_to_all_work(1000.0, arch, skewed).network_bytes, 7_372_800.0)


def test_no_all_to_all_without_expert_parallelism() -> None:
    arch = catalog_arch(QWEN3_30B)
    shapes = shard_shapes(arch, deployment(catalog_gpu(H100), tensor=4))
    assert expert_all_to_all_work(1000.0, arch, shapes).network_bytes == 0.0
    graph = build_kernel_graph(arch, flash_attention=True, tensor_group=4, pipeline_stages=1)
    assert not {"moe_dispatch", "moe_combine"} & {n.name for n in graph.nodes}


@pytest.mark.parametrize("per_doubling", [0.0, 0.25])
def test_mixtral_ep2_moves_tokens_all_to_all_only_under_attention_data_parallelism(
    per_doubling: float,
) -> None:
    # A 1024-token prefill on 2 GPUs. Tensor-parallel attention leaves every GPU every token:
    # EP2 runs its local experts on them and the MoE output's all-reduce sums the ranks, the
    # network bytes of TP2 (no all-to-all, as vLLM and TensorRT-LLM run it). Attention DP 2 x
    # EP2 has no all-reduce and moves, per GPU and direction, 512 tokens x 2 experts x 4096 x
    # 2 B x 1/2 remote = 4,194,304 B; x 2 directions x 32 layers x 2 GPUs = 536,870,912 B,
    # times the imbalance 1 + per_doubling x log2(2).
    arch = catalog_arch(MIXTRAL)
    gpu, coefficients = catalog_gpu(H100), _with_imbalance(per_doubling)
    workload = Workload(batch_size=1, prompt_tokens=1024, output_tokens=1)
    layouts = {
        "tp": deployment(gpu, tensor=2),
        "ep": deployment(gpu, expert=2),
        "dp": Deployment(gpu, Parallelism(tensor=1, expert=2, data=2), Precision()),
    }
    network = {}
    for name, layout in layouts.items():
        estimate = estimate_request(arch, workload, layout, coefficients, check_memory=False)
        network[name] = float(estimate.prefill.table.column("network_bytes").sum())
    assert_allclose(network["ep"], network["tp"], rtol=1e-12)
    assert_allclose(network["dp"], 536_870_912.0 * (1.0 + per_doubling), rtol=1e-12)
