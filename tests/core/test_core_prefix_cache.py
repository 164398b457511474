"""Prefix-cache hits (`cached_prompt_tokens`): not recomputed in prefill, but the new prompt
tokens attend over them (their KV is read), and they count in the KV cache and the decode
contexts.

Hand-worked on ONE_LAYER_DENSE (hidden 1024, 8 heads of 128, 8 KV heads, gated MLP of 4096):
weight elements one token passes through in the layer's GEMMs: QKV 1024 x 3072 + O 1024 x 1024
+ gate/up 1024 x 8192 + down 4096 x 1024 = 16,777,216, i.e. 33,554,432 FLOPs per token.
Two sequences of 100 prompt tokens, 60 of them cached: 2 x 60 = 120 tokens not computed.
"""

from __future__ import annotations

from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture
from service.core.estimate import estimate_request
from service.core.results import RequestEstimate
from service.core.workload import Workload
from tests.core.core_support import (
    IDEAL,
    ONE_LAYER_DENSE,
    catalog_gpu,
    column_sum,
    deployment,
)

H100 = deployment(catalog_gpu("H100-SXM5-80GB"))
LAYER_GEMMS = {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
FLOPS_PER_TOKEN = 2 * 16_777_216
KV_BYTES_PER_KEY = 2 * 1024 * 2  # K and V, 8 heads x 128, bf16


def priced(batch: int, prompt: int, output: int, cached: int = 0) -> RequestEstimate:
    return estimate_request(
        ONE_LAYER_DENSE, Workload(batch, prompt, output, cached_prompt_tokens=cached), H100, IDEAL
    )


def test_a_cache_hit_removes_exactly_its_prefill_gemm_flops() -> None:
    hit, miss = priced(2, 100, 5, cached=60), priced(2, 100, 5)
    removed = column_sum(miss.prefill, "tensor_flops", LAYER_GEMMS) - column_sum(
        hit.prefill, "tensor_flops", LAYER_GEMMS
    )
    assert removed == 120 * FLOPS_PER_TOKEN
    # The same GEMM work as a 40-token prompt without a cache; the LM head still runs per
    # sequence.
    short = priced(2, 40, 5)
    assert column_sum(hit.prefill, "tensor_flops", LAYER_GEMMS) == column_sum(
        short.prefill, "tensor_flops", LAYER_GEMMS
    )
    assert column_sum(hit.prefill, "tensor_flops", {"lm_head"}) == column_sum(
        miss.prefill, "tensor_flops", {"lm_head"}
    )


def test_the_new_tokens_read_the_cached_keys_and_score_against_them() -> None:
    hit, short = priced(2, 100, 5, cached=60), priced(2, 40, 5)
    # Reads: each sequence's 60 cached keys beyond the 40-token prompt's own, K and V.
    added = column_sum(hit.prefill, "kv_cache_read_bytes") - column_sum(
        short.prefill, "kv_cache_read_bytes"
    )
    assert added == 2 * 60 * KV_BYTES_PER_KEY
    # Writes: only the 40 new tokens' keys and values.
    assert column_sum(hit.prefill, "kv_cache_write_bytes") == 2 * 40 * KV_BYTES_PER_KEY
    # Pairs per sequence: 40 x 60 + 40 x 41 / 2 = 3,220 (uncached: 100 x 101 / 2 = 5,050);
    # FLOPs 2 x pairs x 8 heads x (128 + 128).
    pairs_flops = 2 * 8 * (128 + 128)
    assert column_sum(hit.prefill, "tensor_flops", {"attention"}) == 2 * 3220 * pairs_flops
    miss = priced(2, 100, 5)
    assert column_sum(miss.prefill, "tensor_flops", {"attention"}) == 2 * 5050 * pairs_flops


def test_cached_tokens_count_in_the_kv_cache_and_the_decode_contexts() -> None:
    hit, miss = priced(2, 100, 5, cached=60), priced(2, 100, 5)
    assert hit.memory.kv_cache_bytes_per_gpu == miss.memory.kv_cache_bytes_per_gpu
    for field in ("tensor_flops", "kv_cache_read_bytes", "weight_bytes"):
        assert column_sum(hit.decode, field) == column_sum(miss.decode, field)
    assert_allclose(hit.decode.time_s, miss.decode.time_s, rtol=1e-12)
    assert hit.prefill.time_s < miss.prefill.time_s


def test_a_whole_prompt_cached_still_computes_its_last_token() -> None:
    whole, last = priced(1, 100, 5, cached=100), priced(1, 100, 5, cached=99)
    assert column_sum(whole.prefill, "tensor_flops", LAYER_GEMMS) == FLOPS_PER_TOKEN
    assert whole.gpu_j == last.gpu_j


def test_sliding_window_layers_read_only_the_window_of_the_cached_prefix() -> None:
    # Window 32, 60 of 100 prompt tokens cached: the 40 new tokens read themselves and the
    # last 32 cached keys (72 keys of 1,024 B of K and V) and score 40 x 32 = 1,280 pairs per
    # head (every new position is past the window).
    arch = ModelArchitecture(
        hidden_size=512,
        num_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=128,
        intermediate_size=1024,
        vocab_size=1000,
        sliding_window_tokens=32,
        num_sliding_window_layers=1,
    )
    workload = Workload(1, 100, 5, cached_prompt_tokens=60)
    result = estimate_request(arch, workload, H100, IDEAL)
    sliding = {"attention_sliding"}
    assert column_sum(result.prefill, "kv_cache_read_bytes", sliding) == 72 * 1024
    assert column_sum(result.prefill, "tensor_flops", sliding) == 1280 * 2 * 4 * 256
