"""DeepSeek sparse attention (DSA): the lightning indexer scores every key, the MLA attention
reads the top-k, absorbed in both phases (service.core.dsa), worked by hand."""

from __future__ import annotations

import dataclasses

from core_support import A100_1_5TB, column_sum, deployment, estimate
from test_core_mla_phases import SMALL

from service.core.architecture import DsaShape
from service.core.memory import attention_weight_elements

# The small MLA model of test_core_mla_phases (4 heads; latent 32 + rope 4; q/k 12, v 8) with
# an indexer of 2 heads of 8 and top-4 keys.
SPARSE = dataclasses.replace(SMALL, dsa=DsaShape(index_n_heads=2, index_head_dim=8, index_topk=4))


def sparse_estimate(prompt: int, output: int):  # type: ignore[no-untyped-def]
    return estimate(SPARSE, 1, prompt, output, deployment(A100_1_5TB), check_memory=False)


def test_indexer_scores_every_key_in_both_phases() -> None:
    e = sparse_estimate(8, 3)
    # prefill: 8 x 9 / 2 = 36 causal pairs x 2 heads x 2 x 8 = 1,152 FLOP
    assert column_sum(e.prefill, "tensor_flops", {"dsa_indexer"}) == 1_152
    # decode contexts 9 and 10: 19 pairs x 32 = 608 FLOP
    assert column_sum(e.decode, "tensor_flops", {"dsa_indexer"}) == 608
    # index keys (8 fp8 + 4 B scale = 12 B): the quantisation kernel writes the prompt's 8,
    # the logits read 9 + 10 in decode
    assert column_sum(e.prefill, "kv_cache_write_bytes", {"dsa_index_quant"}) == 8 * 12
    assert column_sum(e.decode, "kv_cache_read_bytes", {"dsa_indexer"}) == 19 * 12


def test_indexer_runs_as_its_own_kernels() -> None:
    """8 prompt tokens: the index key's LayerNorm 7 x 8 dims x 8 = 448 ops; RoPE on 4 dims of
    2 query heads and the key, 3 x 8 x 3 x 4 = 288; fp8 quantisation of q and k 3 x 8 x 3 x 8
    plus the 8 x 2 head weights = 592; top-k 2 x 36 logits = 72 ops, writing 8 x 4 int32
    indices = 128 B. Five kernels, each its own launch."""
    e = sparse_estimate(8, 3)
    ops = {name: column_sum(e.prefill, "cuda_core_ops", {name}) for name in (
        "dsa_index_k_norm", "dsa_index_rope", "dsa_index_quant", "dsa_index_topk")}  # fmt: skip
    assert ops == {
        "dsa_index_k_norm": 448, "dsa_index_rope": 288, "dsa_index_quant": 592,
        "dsa_index_topk": 72,
    }  # fmt: skip
    assert column_sum(e.prefill, "activation_write_bytes", {"dsa_index_topk"}) == 128


def test_sparse_attention_attends_the_top_k_absorbed() -> None:
    """FlashMLA's sparse kernels score every one of the 4 top-k slots of each query (padded,
    not cut to the causal prefix) on 64 heads (the 4 heads padded to the kernel's tile), absorbed
    over the latent (QK 36 + V 32), and read only the keys selected."""
    e = sparse_estimate(8, 3)
    # prefill: 8 queries x 4 slots = 32 pairs: 2 x 64 heads x 32 x 68 = 278,528 FLOP
    assert column_sum(e.prefill, "tensor_flops", {"attention_sparse"}) == 278_528
    # decode: 4 slots at each of 2 steps: 2 x 64 x 8 x 68 = 69,632 FLOP; 8 latents of 72 B read
    assert column_sum(e.decode, "tensor_flops", {"attention_sparse"}) == 69_632
    assert column_sum(e.decode, "kv_cache_read_bytes", {"attention_sparse"}) == 8 * 72
    # kv_b_proj absorbs the 8 prompt tokens (no decompression): 2 x 8 x 32 x 64 = 32,768 FLOP
    assert column_sum(e.prefill, "tensor_flops", {"kv_b_proj"}) == 32_768


def test_kv_cache_keeps_every_latent_and_index_key() -> None:
    # 11 tokens x (72 B latent + 12 B index key): attention reads 4 but the cache holds all
    assert sparse_estimate(8, 3).memory.kv_cache_bytes_per_gpu == 11 * (72 + 12)


def test_indexer_weights_are_counted() -> None:
    # wq_b 16 x 2 x 8 = 256, wk 64 x 8 = 512, weights_proj 64 x 2 = 128
    assert attention_weight_elements(SPARSE) - attention_weight_elements(SMALL) == 896
