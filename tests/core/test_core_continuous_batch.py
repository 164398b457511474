"""A request inside a continuous batch of C sequences in steady state (`concurrent_sequences`).

Hand-worked on ONE_LAYER_DENSE (GEMMs: 33,554,432 FLOPs per token; KV: 4,096 B per key) for
one sequence of 100 prompt and 5 output tokens among C = 10: each sequence lives O = 5 passes,
so a pass computes C / O = 2 prompts (200 tokens) and advances C (O - 1) / O = 8 sequences,
T = 208 tokens. The decoding sequences' contexts average 100 + 5 / 2 = 102.5 keys, so a pass
reads 2 x 100 + 8 x 102.5 = 1,020 keys. The request's share: its 100 prompt tokens of the
prefill pass (100 / 208), its one token of each of 4 decode passes (1 / 208).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture
from service.core.estimate import estimate_request
from service.core.results import RequestEstimate
from service.core.steady_state import pass_mix
from service.core.workload import Workload
from tests.core.core_support import (
    IDEAL,
    ONE_LAYER_DENSE,
    REALISTIC,
    catalog_arch,
    catalog_gpu,
    column_sum,
    deployment,
)

H100 = deployment(catalog_gpu("H100-SXM5-80GB"))
LAYER_GEMMS = {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
FLOPS_PER_TOKEN = 2 * 16_777_216
KV_BYTES_PER_KEY = 4096


def running(batch: int, prompt: int, output: int, concurrent: int | None) -> RequestEstimate:
    workload = Workload(batch, prompt, output, concurrent_sequences=concurrent)
    return estimate_request(ONE_LAYER_DENSE, workload, H100, IDEAL)


def test_pass_mix_by_hand() -> None:
    one = np.array([1.0])
    mix = pass_mix(one, np.array([100.0]), np.array([0.0]), np.array([5.0]), np.array([10.0]),
                   np.array([True]))  # fmt: skip
    assert_allclose(mix.prefilling[:, 0], [2.0, 2.0])
    assert_allclose(mix.decoding[:, 0], [8.0, 8.0])
    assert_allclose(mix.share[:, 0], [100 / 208, 1 / 208])
    assert_allclose(mix.mean_context, [102.5])
    assert_allclose(mix.steps[:, 0], [1.0, 4.0])


def test_the_request_is_attributed_its_own_tokens_gemm_work() -> None:
    result = running(1, 100, 5, 10)
    prefill = column_sum(result.prefill, "tensor_flops", LAYER_GEMMS)
    decode = column_sum(result.decode, "tensor_flops", LAYER_GEMMS)
    assert prefill == pytest.approx(100 * FLOPS_PER_TOKEN, rel=1e-12)
    assert decode == pytest.approx(4 * FLOPS_PER_TOKEN, rel=1e-12)


def test_kv_reads_follow_the_mixed_contexts_of_the_pass() -> None:
    result = running(1, 100, 5, 10)
    prefill = column_sum(result.prefill, "kv_cache_read_bytes")
    decode = column_sum(result.decode, "kv_cache_read_bytes")
    assert prefill == pytest.approx(1020 * KV_BYTES_PER_KEY * 100 / 208, rel=1e-12)
    assert decode == pytest.approx(4 * 1020 * KV_BYTES_PER_KEY / 208, rel=1e-12)
    # The same sequence alone reads its own context, 101 + 102 + 103 + 104 keys.
    alone = running(1, 100, 5, None)
    assert column_sum(alone.decode, "kv_cache_read_bytes") == 410 * KV_BYTES_PER_KEY


def test_every_pass_is_the_same_mean_pass() -> None:
    # Time to first token and time per output token are one pass; energy per token of it is
    # the same in both phases: decode / prefill energy = 4 tokens / 100 tokens.
    result = running(1, 100, 5, 10)
    assert result.decode.steps == 4
    assert_allclose(result.time_per_output_token_s, result.prefill.time_s, rtol=1e-12)
    assert_allclose(result.decode.gpu_j / result.prefill.gpu_j, 4 / 100, rtol=1e-12)
    assert_allclose(result.total_s, 5 * result.prefill.time_s, rtol=1e-12)


def test_kv_occupancy_follows_the_mean_context_not_the_full_one() -> None:
    # Llama-3.1-8B, 511 running sequences of 690 + 397 tokens: each holds 690 + 396 / 2 = 888
    # tokens on average, 131,072 B each: 511 x 888 x 131,072 B (a static batch: x 1,087).
    arch = catalog_arch("meta-llama/Llama-3.1-8B-Instruct")
    workload = Workload(1, 690, 397, concurrent_sequences=511)
    result = estimate_request(arch, workload, H100, REALISTIC)
    assert result.memory.kv_cache_bytes_per_gpu == 511 * 888 * 131_072
    assert not result.warnings


def test_per_sequence_energy_falls_as_the_batch_grows_and_time_per_token_does_not() -> None:
    arch = catalog_arch("meta-llama/Llama-3.1-8B-Instruct")
    results = [
        estimate_request(arch, Workload(1, 690, 397, concurrent_sequences=c), H100, REALISTIC)
        for c in (1, 8, 64, 255)
    ]
    energy = [r.per_sequence_gpu_j for r in results]
    tpot = [r.time_per_output_token_s for r in results]
    assert all(a > b for a, b in itertools.pairwise(energy))
    assert all(a <= b for a, b in itertools.pairwise(tpot))


def test_a_request_with_more_sequences_pays_for_each() -> None:
    one = running(1, 100, 5, 10)
    four = running(4, 100, 5, 10)
    assert_allclose(four.gpu_j, 4 * one.gpu_j, rtol=1e-12)
    assert_allclose(four.time_per_output_token_s, one.time_per_output_token_s, rtol=1e-12)


def test_sliding_window_layers_read_at_most_the_window_in_a_continuous_pass() -> None:
    # Two layers (one sliding, window 32), 2 KV heads of 128: 1,024 B of K and V per key.
    # The pass of the module docstring (2 prompts of 100, 8 decoding sequences at contexts
    # 101 ... 104) reads in its sliding layer 2 x 100 + 8 x min(c, 32) = 456 keys and scores
    # 2 x (32 x 33 / 2 + 68 x 32) + 8 x 32 = 5,664 pairs per head.
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
    workload = Workload(1, 100, 5, concurrent_sequences=10)
    result = estimate_request(arch, workload, H100, IDEAL)
    sliding = {"attention_sliding"}
    prefill_reads = column_sum(result.prefill, "kv_cache_read_bytes", sliding)
    decode_reads = column_sum(result.decode, "kv_cache_read_bytes", sliding)
    assert prefill_reads == pytest.approx(456 * 1024 * 100 / 208, rel=1e-12)
    assert decode_reads == pytest.approx(4 * 456 * 1024 / 208, rel=1e-12)
    flops = column_sum(result.prefill, "tensor_flops", sliding)
    assert flops == pytest.approx(5664 * 2 * 4 * 256 * 100 / 208, rel=1e-12)
