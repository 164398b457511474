"""Gemma's norms: 4 per layer in Gemma 2 and 3 (sandwich), and unfused under vLLM 0.5.4.

Numbers by hand from the formulas of `counts.norm_work_of`: a fused norm reads and writes each
activation once in 16 bits (2 + 2 B per element); vLLM 0.5.4's GemmaRMSNorm as PyTorch ops reads
it once in 16 bits and 5 times in fp32, writes it 4 times in fp32 and once in 16 bits
(2 + 5 x 4 + 4 x 4 + 2 = 40 B per element).
"""

from __future__ import annotations

import dataclasses

import pytest
from core_support import A100_1_5TB, catalog_arch, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.catalog.engines import unfused_norms
from service.core.architecture import ModelArchitecture
from service.core.graph import build_kernel_graph

NORMS = {"input_norm", "attn_output_norm", "post_attn_norm", "mlp_output_norm", "final_norm"}
# 2 layers, hidden 512: a decode step at batch 2 normalises 2 x 512 = 1,024 elements per norm.
SANDWICH = ModelArchitecture(
    hidden_size=512,
    num_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=128,
    intermediate_size=1024,
    vocab_size=1000,
    sandwich_norms=True,
    norm_unit_offset=True,
)


def norm_bytes(arch: ModelArchitecture, batch: int, output: int, *, unfused: bool) -> float:
    """Decode activation bytes (read + written) of every norm kernel."""
    dep = dataclasses.replace(deployment(A100_1_5TB), unfused_norms=unfused)
    decode = estimate(arch, batch, 8, output, dep, check_memory=False).decode
    return column_sum(decode, "activation_read_bytes", NORMS) + column_sum(
        decode, "activation_write_bytes", NORMS
    )


def test_sandwich_layers_have_four_norms_around_their_sub_layers() -> None:
    for tensor, before in ((1, "o_proj"), (2, "attn_all_reduce")):
        graph = build_kernel_graph(
            SANDWICH, flash_attention=True, tensor_group=tensor, pipeline_stages=1
        )
        names = [n.name for n in graph.nodes]
        norms = [n.name for n in graph.nodes if n.kind == "norm"]
        assert norms == ["input_norm", "attn_output_norm", "post_attn_norm", "mlp_output_norm"]
        edges = {(names[s], names[t]) for s, t in graph.edges}
        assert (before, "attn_output_norm") in edges
        assert ("attn_output_norm", "attn_residual_add") in edges
        assert ("mlp_output_norm", "mlp_residual_add") in edges
    plain = dataclasses.replace(SANDWICH, sandwich_norms=False)
    graph = build_kernel_graph(plain, flash_attention=True, tensor_group=1, pipeline_stages=1)
    assert [n.name for n in graph.nodes if n.kind == "norm"] == ["input_norm", "post_attn_norm"]


def test_norm_bytes_by_hand() -> None:
    # 2 decode steps x (4 norms x 2 layers + final norm) x 1,024 elements = 18,432 elements.
    assert norm_bytes(SANDWICH, 2, 3, unfused=False) == pytest.approx(18_432 * 4)  # 73,728 B
    assert norm_bytes(SANDWICH, 2, 3, unfused=True) == pytest.approx(18_432 * 40)  # 737,280 B
    plain = dataclasses.replace(SANDWICH, sandwich_norms=False)
    # (2 norms x 2 layers + 1) x 1,024 x 2 steps = 10,240 elements.
    assert norm_bytes(plain, 2, 3, unfused=False) == pytest.approx(10_240 * 4)


def test_unfused_norm_time_on_the_textbook_roofline() -> None:
    # Memory-bound at 1.5 TB/s (no launch cost): activations plus each execution's 512 bf16
    # weights (18 executions x 1,024 B = 18,432 B): (737,280 + 18,432) B / 1.5e12 B/s =
    # 503.808 ns unfused, (73,728 + 18,432) B / 1.5e12 B/s = 61.44 ns fused. The ops (4 per
    # element) are unchanged.
    def seconds(unfused: bool) -> tuple[float, float]:
        dep = dataclasses.replace(deployment(A100_1_5TB), unfused_norms=unfused)
        decode = estimate(SANDWICH, 2, 8, 3, dep, check_memory=False).decode
        return column_sum(decode, "cuda_core_ops", NORMS), sum(
            k.time_s for k in decode.kernels if k.name in NORMS
        )

    fused_ops, fused_s = seconds(False)
    unfused_ops, unfused_s = seconds(True)
    assert unfused_ops == fused_ops == 4 * 18_432
    assert_allclose(unfused_s, 503.808e-9, rtol=1e-9)
    assert_allclose(fused_s, 61.44e-9, rtol=1e-9)


def test_gemma_2_9b_decode_step_norm_bytes() -> None:
    # gemma-2-9b (hidden 3584, 42 layers) at batch 192, one decode step: 192 x 3,584 = 688,128
    # elements per norm. Before: 2 fused norms per layer + final = 85 norms x 4 B = 233,963,520 B.
    # Under vLLM 0.5.4: 4 x 42 + 1 = 169 unfused norms x 40 B = 4,651,745,280 B.
    arch = catalog_arch("google/gemma-2-9b-it")
    assert arch.sandwich_norms and arch.norm_unit_offset
    before = dataclasses.replace(arch, sandwich_norms=False)
    assert norm_bytes(before, 192, 2, unfused=False) == pytest.approx(233_963_520)
    assert norm_bytes(arch, 192, 2, unfused=True) == pytest.approx(4_651_745_280)


def test_only_vllm_0_5_4_runs_gemma_norms_unfused() -> None:
    gemma_2, gemma_1 = catalog_arch("google/gemma-2-9b-it"), catalog_arch("google/gemma-7b")
    assert unfused_norms(gemma_2, "vllm-v0") and unfused_norms(gemma_1, "vllm-v0")
    assert not gemma_1.sandwich_norms
    assert not unfused_norms(gemma_2, "vllm-v1")
    llama = catalog_arch("meta-llama/Llama-3.1-8B-Instruct")
    assert not llama.norm_unit_offset and not llama.sandwich_norms
    assert not unfused_norms(llama, "vllm-v0")
