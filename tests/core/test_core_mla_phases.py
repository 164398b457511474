"""Exact MLA: un-absorbed attention and kv_b_proj decompression in prefill, weight-absorbed
attention over the latent in decode (service.core.mla), worked by hand."""

from __future__ import annotations

from core_support import A100_1_5TB, catalog_arch, catalog_gpu, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.architecture import MlaShape, ModelArchitecture
from service.core.counts import AttentionSpan, PassShape, attention_work_of, weight_gemm_work_of
from service.core.graph import KernelNode
from service.core.mla import KV_UP_OPERAND
from service.core.shards import shard_shapes

# A made-up MLA model: 4 heads; latent 32 + rope 4 = 36; q/k head 8 + 4 = 12, v head 8.
SMALL = ModelArchitecture(
    hidden_size=64,
    num_layers=1,
    num_attention_heads=4,
    num_key_value_heads=4,
    head_dim=12,
    intermediate_size=128,
    vocab_size=100,
    mla=MlaShape(
        q_lora_rank=16, kv_lora_rank=32, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8
    ),
)
SHAPES = shard_shapes(SMALL, deployment(A100_1_5TB))
ATTENTION = KernelNode("attention", "attention", 1, "full")
KV_B_PROJ = KernelNode("kv_b_proj", "gemm", 1, KV_UP_OPERAND)
# A prefill of 10 tokens (55 causal pairs); a decode step of one token over 100 keys.
PREFILL = PassShape(10.0, 1.0, 1.0, {"full": AttentionSpan(55.0, 10.0, 10.0)}, 1)
DECODE = PassShape(1.0, 1.0, 1.0, {"decode": AttentionSpan(100.0, 100.0, 1.0)}, 1)


def test_prefill_attention_is_unabsorbed() -> None:
    # 2 x 4 heads x 55 pairs x (QK 12 + V 8) = 8,800 FLOP
    work = attention_work_of(ATTENTION, SMALL, SHAPES, PREFILL)
    assert work.tensor_flops == 8_800
    # it writes the 10 new latents (36 x 2 B) to the cache and reads none from it
    assert work.kv_cache_write_bytes == 10 * 36 * 2
    assert work.kv_cache_read_bytes == 0


def test_decode_attention_is_absorbed_over_the_latent() -> None:
    # 2 x 4 heads x 100 keys x (QK 36 + V 32) = 54,400 FLOP; the latent read once: 100 x 36 x 2 B
    work = attention_work_of(ATTENTION, SMALL, SHAPES, DECODE)
    assert work.tensor_flops == 54_400
    assert work.kv_cache_read_bytes == 7_200


def test_kv_b_proj_decompresses_prefill_keys_and_absorbs_decode_tokens() -> None:
    # prefill: 10 keys x 32 latent -> 4 x (8 + 8): 2 x 10 x 32 x 64 = 40,960 FLOP
    assert weight_gemm_work_of(KV_B_PROJ, SMALL, SHAPES, PREFILL).tensor_flops == 40_960
    # decode: W_UK (2 x 4 x 8 x 32) + W_UV (2 x 4 x 32 x 8) for one token = 4,096 FLOP
    decode = weight_gemm_work_of(KV_B_PROJ, SMALL, SHAPES, DECODE)
    assert decode.tensor_flops == 4_096
    assert decode.weight_bytes == 32 * 64 * 2  # the weight read once


def test_kv_cache_is_the_latent_and_rope_key_per_layer() -> None:
    # (kv_lora_rank 32 + qk_rope 4) x 2 B = 72 B per token and layer
    assert SHAPES.kv_cache_width * SHAPES.kv_bytes == 72


# DeepSeek-V3 on one H200, bf16: 61 layers, 128 heads, prompt 64 (2,080 causal pairs), output 5
# (decode contexts 65..68, sum 266).
def test_deepseek_v3_phases_by_hand() -> None:
    arch = catalog_arch("deepseek-ai/DeepSeek-V3")
    e = estimate(arch, 1, 64, 5, deployment(catalog_gpu("H200-SXM-141GB")), check_memory=False)
    # prefill: 2 x 128 x 2,080 x (192 + 128) x 61 = 10,394,009,600 FLOP
    assert_allclose(column_sum(e.prefill, "tensor_flops", {"attention"}), 10_394_009_600)
    # decode: 2 x 128 x 266 x (576 + 512) x 61 = 4,519,395,328 FLOP
    assert_allclose(column_sum(e.decode, "tensor_flops", {"attention"}), 4_519_395_328)
    # kv_b_proj 512 -> 128 x (128 + 128): prefill 2 x 64 keys x 512 x 32,768 x 61;
    # decode 4 steps x 1 token, the same per row
    assert_allclose(column_sum(e.prefill, "tensor_flops", {"kv_b_proj"}), 130_996_502_528)
    assert_allclose(column_sum(e.decode, "tensor_flops", {"kv_b_proj"}), 8_187_281_408)
    assert e.warnings == ()  # MLA is no longer an approximation


def test_the_latents_are_normalised_by_kernels_of_their_own() -> None:
    """q_a_layernorm over the 16-wide query latent and kv_a_layernorm over the 32-wide KV latent:
    RMSNorm's 4 ops per element, 10 prefill tokens: 640 and 1,280 ops, reading and writing
    10 x 16 x 2 B and 10 x 32 x 2 B. A full-rank query (q_lora_rank 0) has no q_a norm."""
    from dataclasses import replace

    from service.core.counts import norm_work_of
    from service.core.graph import build_kernel_graph

    q_a = norm_work_of(KernelNode("q_a_norm", "norm", 1, "mla_q_a"), SMALL, SHAPES, PREFILL)
    kv_a = norm_work_of(KernelNode("kv_a_norm", "norm", 1, "mla_kv_a"), SMALL, SHAPES, PREFILL)
    assert (q_a.cuda_core_ops, kv_a.cuda_core_ops) == (640, 1_280)
    assert (q_a.activation_read_bytes, kv_a.activation_write_bytes) == (320, 640)
    names = [n.name for n in build_kernel_graph(SMALL, flash_attention=True, tensor_group=1,
                                                pipeline_stages=1).nodes]  # fmt: skip
    assert names[names.index("qkv_proj") + 1 : names.index("qkv_proj") + 3] == [
        "q_a_norm", "kv_a_norm"
    ]  # fmt: skip
    full_rank = replace(SMALL, mla=replace(SMALL.mla, q_lora_rank=0))  # type: ignore[type-var]
    graph = build_kernel_graph(full_rank, flash_attention=True, tensor_group=1, pipeline_stages=1)
    assert "q_a_norm" not in {n.name for n in graph.nodes}
