"""A request inside a continuous batch of C sequences in steady state (`concurrent_sequences`).

Hand-worked on ONE_LAYER_DENSE (GEMMs: 33,554,432 FLOPs per token; KV: 4,096 B per key) for one
sequence of 100 prompt and 5 output tokens among C = 10: each sequence lives O = 5 passes, so a
mean pass computes C / O = 2 prompts (200 tokens) and advances C (O - 1) / O = 8 sequences, T =
208 tokens; the decoding sequences' contexts average 100 + 5 / 2 = 102.5 keys, so it reads 2 x
100 + 8 x 102.5 = 1,020 keys. The pass that computes the request's prompt (budget 8,192 tokens,
8,184 left beside the 8 decode tokens: one chunk) carries it and the 2 prompts that arrive per
pass on average: 308 tokens, 3 x 100 + 8 x 102.5 = 1,120 keys. The request's share of the
counts: its 100 prompt tokens of that pass (100 / 308), its one token of each of 4 decode
passes (1 / 208). Before it, it waits half a pass and the prompts queued ahead: load 200 /
8,184, 0.024438 / (2 x 0.975562) x 100 / 8,184 = 1.5305e-4 passes.
"""

from __future__ import annotations

import dataclasses
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
    assert_allclose(mix.waiting, [0.5])  # no budget: no queue, half a pass
    mix = pass_mix(one, np.array([100.0]), np.array([0.0]), np.array([5.0]), np.array([10.0]),
                   np.array([True]), 8192.0)  # fmt: skip
    assert_allclose(mix.prefilling[:, 0], [3.0, 2.0])
    assert_allclose(mix.decoding[:, 0], [8.0, 8.0])
    assert_allclose(mix.share[:, 0], [100 / 308, 1 / 208])
    assert_allclose(mix.mean_context, [102.5])
    assert_allclose(mix.steps[:, 0], [1.0, 4.0])
    assert_allclose(mix.waiting, [0.5 + 1.5305e-4], rtol=1e-4)


def test_a_pass_known_all_continuous_mixes_as_one_that_tests_each_row() -> None:
    """all_continuous (the caller knows every row is continuous) skips the wheres' static
    sides: the same hand values as test_pass_mix_by_hand, the same arrays as without it."""
    batch, prompt, cached = np.array([1.0, 4.0]), np.array([100.0, 300.0]), np.array([0.0, 50.0])
    output, running, every = np.array([5.0, 20.0]), np.array([10.0, 12.0]), np.array([True, True])
    known = pass_mix(batch, prompt, cached, output, running, every, 8192.0, all_continuous=True)
    tested = pass_mix(batch, prompt, cached, output, running, every, 8192.0)
    assert_allclose(known.prefilling[:, 0], [3.0, 2.0])
    assert_allclose(known.share[:, 0], [100 / 308, 1 / 208])
    assert known.all_continuous and not tested.all_continuous
    for field in dataclasses.fields(known):
        if field.name != "all_continuous":
            assert np.array_equal(getattr(known, field.name), getattr(tested, field.name))


def test_static_rows_mix_as_beside_a_continuous_one() -> None:
    """A pass of static batches only skips the continuous terms; each row comes out as it does
    in a pass that has a continuous row (and so evaluates them): b prompts in one pass, O - 1
    decode passes of b sequences, the request paying all of it, no wait."""
    batch, prompt, cached = np.array([4.0, 1.0]), np.array([300.0, 100.0]), np.array([50.0, 0.0])
    output, running = np.array([20.0, 5.0]), np.array([4.0, 10.0])
    alone = pass_mix(batch[:1], prompt[:1], cached[:1], output[:1], running[:1],
                     np.array([False]), 8192.0)  # fmt: skip
    mixed = pass_mix(batch, prompt, cached, output, running, np.array([False, True]), 8192.0)
    for name in ("prefilling", "decoding", "steps", "share"):
        assert np.array_equal(getattr(alone, name)[:, 0], getattr(mixed, name)[:, 0]), name
    for name in ("mean_context", "running", "new_tokens", "waiting"):
        assert np.array_equal(getattr(alone, name), getattr(mixed, name)[:1]), name
    assert alone.prefilling[:, 0].tolist() == [4.0, 0.0]
    assert alone.decoding[:, 0].tolist() == [0.0, 4.0]
    assert alone.steps[:, 0].tolist() == [1.0, 19.0]
    assert alone.share[:, 0].tolist() == [1.0, 1.0]
    assert alone.new_tokens.tolist() == [250.0] and alone.waiting.tolist() == [0.0]


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
    assert prefill == pytest.approx(1120 * KV_BYTES_PER_KEY * 100 / 308, rel=1e-12)
    assert decode == pytest.approx(4 * 1020 * KV_BYTES_PER_KEY / 208, rel=1e-12)
    # The same sequence alone reads its own context, 101 + 102 + 103 + 104 keys.
    alone = running(1, 100, 5, None)
    assert column_sum(alone.decode, "kv_cache_read_bytes") == 410 * KV_BYTES_PER_KEY


def test_time_to_first_token_is_the_wait_then_the_pass_with_the_prompt() -> None:
    # prefill_s = the pass carrying the prompt (its kernels and host time) + (0.5 + 1.5305e-4)
    # mean passes of waiting, which cost the request no energy.
    result = running(1, 100, 5, 10)
    assert result.decode.steps == 4
    tpot = result.time_per_output_token_s
    own_pass = result.prefill.table.kernel_time_s + result.prefill.overhead_s
    assert_allclose(result.prefill.time_s, own_pass + (0.5 + 1.5305e-4) * tpot, rtol=1e-6)
    assert own_pass > tpot  # 308 tokens and 1,120 keys against a mean pass's 208 and 1,020
    assert_allclose(result.total_s, result.prefill.time_s + 4 * tpot, rtol=1e-12)


def test_a_prompt_longer_than_the_budget_left_is_chunked_and_queued() -> None:
    # Budget 58 tokens: 50 left beside the 8 decode tokens, so the 100-token prompt takes 2
    # passes of one 50-token chunk each (no room for others': 58 tokens each, share 100 / 116).
    # The arrivals' load 200 / 50 = 4 is capped at 0.9: 0.9 / 0.2 x 100 / 50 = 9 passes queued.
    one = np.array([1.0])
    mix = pass_mix(one, np.array([100.0]), np.array([0.0]), np.array([5.0]), np.array([10.0]),
                   np.array([True]), 58.0)  # fmt: skip
    assert_allclose(mix.prefilling[0], [0.5])
    assert_allclose(mix.steps[:, 0], [2.0, 4.0])
    assert_allclose(mix.share[:, 0], [100 / 116, 1 / 208])
    assert_allclose(mix.waiting, [9.5])
    # Budget 408: 400 left, one chunk with both arrivals (3 x 100 <= 400); load 200 / 400 = 0.5:
    # 0.5 / 1.0 x 100 / 400 = 0.125 passes queued.
    mix = pass_mix(one, np.array([100.0]), np.array([0.0]), np.array([5.0]), np.array([10.0]),
                   np.array([True]), 408.0)  # fmt: skip
    assert_allclose(mix.prefilling[0], [3.0])
    assert_allclose(mix.waiting, [0.625])


def test_a_chunked_prompt_is_attributed_its_own_gemm_work_and_waits_longer() -> None:
    chunked = dataclasses.replace(H100, prefill_budget_tokens=58)
    workload = Workload(1, 100, 5, concurrent_sequences=10)
    result = estimate_request(ONE_LAYER_DENSE, workload, chunked, IDEAL)
    prefill = column_sum(result.prefill, "tensor_flops", LAYER_GEMMS)
    assert prefill == pytest.approx(100 * FLOPS_PER_TOKEN, rel=1e-12)  # 2 x 58 x 100 / 116
    whole = running(1, 100, 5, 10)
    assert result.prefill.time_s > whole.prefill.time_s
    assert_allclose(result.time_per_output_token_s, whole.time_per_output_token_s, rtol=1e-12)


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
    # Decode: 4 tokens of each mean pass instead of 1. Prefill: its 4 prompts share one pass
    # with the 2 arrivals (608 tokens, its GEMM work); their energy is 4 x 100 prompt tokens
    # of the mean pass (tests/core/test_core_continuous_energy.py).
    one = running(1, 100, 5, 10)
    four = running(4, 100, 5, 10)
    assert_allclose(four.decode.gpu_j, 4 * one.decode.gpu_j, rtol=1e-12)
    prefill = column_sum(four.prefill, "tensor_flops", LAYER_GEMMS)
    assert prefill == pytest.approx(400 * FLOPS_PER_TOKEN, rel=1e-12)
    assert_allclose(four.prefill.gpu_j, 4 * one.prefill.gpu_j, rtol=1e-12)
    assert_allclose(four.time_per_output_token_s, one.time_per_output_token_s, rtol=1e-12)


def test_sliding_window_layers_read_at_most_the_window_in_a_continuous_pass() -> None:
    # Two layers (one sliding, window 32), 2 KV heads of 128: 1,024 B of K and V per key.
    # The mean pass of the module docstring (2 prompts of 100, 8 decoding sequences at
    # contexts 101 ... 104) reads in its sliding layer 2 x 100 + 8 x min(c, 32) = 456 keys;
    # the pass with the request's prompt (3 prompts) reads 3 x 100 + 8 x 32 = 556 keys and
    # scores 3 x (32 x 33 / 2 + 68 x 32) + 8 x 32 = 8,368 pairs per head.
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
    assert prefill_reads == pytest.approx(556 * 1024 * 100 / 308, rel=1e-12)
    assert decode_reads == pytest.approx(4 * 456 * 1024 / 208, rel=1e-12)
    flops = column_sum(result.prefill, "tensor_flops", sliding)
    assert flops == pytest.approx(8368 * 2 * 4 * 256 * 100 / 308, rel=1e-12)
