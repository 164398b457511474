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
    # index keys (8 fp8 + 4 B scale = 12 B): prefill writes 8, decode reads 9 + 10, writes 2
    assert column_sum(e.prefill, "kv_cache_write_bytes", {"dsa_indexer"}) == 8 * 12
    assert column_sum(e.decode, "kv_cache_read_bytes", {"dsa_indexer"}) == 19 * 12


def test_sparse_attention_attends_the_top_k_absorbed() -> None:
    e = sparse_estimate(8, 3)
    # prefill: sum over queries of min(c, 4) = 1 + 2 + 3 + 4 x 5 = 26 pairs, absorbed over the
    # latent (QK 36 + V 32): 2 x 4 heads x 26 x 68 = 14,144 FLOP
    assert column_sum(e.prefill, "tensor_flops", {"attention_sparse"}) == 14_144
    # decode: 4 keys at each of 2 steps: 2 x 4 x 8 x 68 = 4,352 FLOP; 8 latents of 72 B read
    assert column_sum(e.decode, "tensor_flops", {"attention_sparse"}) == 4_352
    assert column_sum(e.decode, "kv_cache_read_bytes", {"attention_sparse"}) == 8 * 72
    # kv_b_proj absorbs the 8 prompt tokens (no decompression): 2 x 8 x 32 x 64 = 32,768 FLOP
    assert column_sum(e.prefill, "tensor_flops", {"kv_b_proj"}) == 32_768


def test_kv_cache_keeps_every_latent_and_index_key() -> None:
    # 11 tokens x (72 B latent + 12 B index key): attention reads 4 but the cache holds all
    assert sparse_estimate(8, 3).memory.kv_cache_bytes_per_gpu == 11 * (72 + 12)


def test_indexer_weights_are_counted() -> None:
    # wq_b 16 x 2 x 8 = 256, wk 64 x 8 = 512, weights_proj 64 x 2 = 128
    assert attention_weight_elements(SPARSE) - attention_weight_elements(SMALL) == 896
