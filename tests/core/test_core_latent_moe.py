"""Latent mixture of experts (Nemotron 3 Super/Ultra): routed experts read and write a latent
of `moe_latent_size`, projected from and back to hidden by two replicated GEMMs; the router and
the shared expert keep the hidden width. Counts worked out by hand from the config's numbers."""

from __future__ import annotations

from dataclasses import replace

import pytest
from core_support import catalog_arch, catalog_gpu, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture, validate_architecture
from service.core.cost_model_errors import InvalidArchitecture
from service.core.counts import expert_all_to_all_work
from service.core.graph import build_kernel_graph
from service.core.memory import weight_bytes_per_gpu
from service.core.shards import shard_shapes

SUPER = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"  # hidden 4096, latent 1024, 40 MoE layers
H200 = "H200-SXM-141GB"
H, LATENT, WIDTH, TOP_K, EXPERTS, MOE_LAYERS = 4096, 1024, 2688, 22, 512, 40


def _super() -> ModelArchitecture:
    arch = catalog_arch(SUPER)
    assert (arch.hidden_size, arch.moe_latent_size, arch.expert_width) == (H, LATENT, WIDTH)
    assert (arch.experts_per_token, arch.num_experts, arch.num_moe_layers) == (
        TOP_K,
        EXPERTS,
        MOE_LAYERS,
    )
    return arch


def test_the_graph_projects_into_and_out_of_the_latent() -> None:
    graph = build_kernel_graph(_super(), flash_attention=True, tensor_group=1, pipeline_stages=1)
    names = [n.name for n in graph.nodes]
    assert names.index("moe_latent_down") < names.index("moe_gate_up")
    assert names.index("moe_down") < names.index("moe_latent_up")
    plain = replace(_super(), moe_latent_size=None)
    full = build_kernel_graph(plain, flash_attention=True, tensor_group=1, pipeline_stages=1)
    assert not {"moe_latent_down", "moe_latent_up"} & {n.name for n in full.nodes}


def test_prefill_flops_of_the_latent_experts_by_hand() -> None:
    """4096 tokens touch every expert: 4096 x 22 rows through up (1024 -> 2688, squared ReLU:
    no gate) and down (2688 -> 1024), 2 FLOPs per multiply-add; the projections 4096 tokens x
    4096 x 1024 each way; all 40 MoE layers."""
    tokens = 4096
    prefill = estimate(
        _super(), 1, tokens, 1, deployment(catalog_gpu(H200)), check_memory=False
    ).prefill
    rows = tokens * TOP_K
    experts = 2 * (2.0 * rows * LATENT * WIDTH) * MOE_LAYERS
    projections = 2 * (2.0 * tokens * H * LATENT) * MOE_LAYERS
    assert_allclose(column_sum(prefill, "tensor_flops", {"moe_gate_up", "moe_down"}), experts)
    assert_allclose(
        column_sum(prefill, "tensor_flops", {"moe_latent_down", "moe_latent_up"}), projections
    )


def test_expert_dispatch_carries_latent_rows() -> None:
    """EP4, 1000 tokens: 250 per GPU x 22 experts x 1024 bf16 elements x 3/4 remote."""
    arch = _super()
    shapes = shard_shapes(arch, deployment(catalog_gpu(H200), expert=4))
    work = expert_all_to_all_work(1000.0, arch, shapes)
    assert_allclose(work.network_bytes, 250 * TOP_K * LATENT * 2 * 0.75, rtol=1e-12)


def test_ep4_weights_per_gpu_by_hand() -> None:
    """EP4 (a stage of 4 GPUs): each holds 128 of the 512 experts whole (2 x 1024 x 2688, no
    gate) and both latent projections whole (2 x 4096 x 1024, replicated); attention (8 layers
    of 4096 x (4096 + 2 x 256) + 4096 x 4096), Mamba-2 (40 layers of in_proj 4096 x 18560,
    conv 10240 x 4, out_proj 8192 x 4096), the shared expert (2 x 4096 x 5376) and the two
    131072 x 4096 tables split 4 ways; bf16, 2 B each."""
    arch = _super()
    shapes = shard_shapes(arch, deployment(catalog_gpu(H200), expert=4))
    experts = 128 * 2 * LATENT * WIDTH
    latent = 2 * H * LATENT
    attention = H * (H + 2 * 256) + H * H
    mamba = H * 18560 + 10240 * 4 + 8192 * H
    split = (8 * attention + 40 * mamba + MOE_LAYERS * 2 * H * 5376 + 2 * 131072 * H) / 4
    elements = MOE_LAYERS * (experts + latent) + split
    assert_allclose(weight_bytes_per_gpu(arch, shapes, 1), 2.0 * elements)


@pytest.mark.parametrize("latent", [0, -8])
def test_a_latent_must_be_positive(latent: int) -> None:
    with pytest.raises(InvalidArchitecture) as error:
        validate_architecture(replace(_super(), moe_latent_size=latent))
    assert error.value.field == "moe_latent_size"


def test_a_latent_needs_experts() -> None:
    dense = catalog_arch("meta-llama/Llama-3.1-8B-Instruct")
    with pytest.raises(InvalidArchitecture):
        validate_architecture(replace(dense, moe_latent_size=1024))
