"""Sliding-window layers read at most the window of the KV cache."""

from __future__ import annotations

import pytest
from core_support import A100_1_5TB, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture

# 2 layers, one with a 32-token window; K + V per token: 2 KV heads · 128 · 2 = 512 elements,
# 1,024 B in bf16, so a decode step at batch 2 reads 2,048 B per key.
ARCH = ModelArchitecture(
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
BATCH = 2
SLIDING = {"attention_sliding", "attention_scores_sliding", "attention_context_sliding"}
FULL = {"attention", "attention_scores", "attention_context"}


def kv_reads(prompt: int, output: int, flash: bool) -> tuple[float, float]:
    """(sliding, full) decode KV-cache read bytes."""
    decode = estimate(ARCH, BATCH, prompt, output, deployment(A100_1_5TB, flash=flash)).decode
    return (
        column_sum(decode, "kv_cache_read_bytes", SLIDING),
        column_sum(decode, "kv_cache_read_bytes", FULL),
    )


@pytest.mark.parametrize("flash", [True, False])
def test_reads_stop_growing_past_the_window(flash: bool) -> None:
    sliding_short, full_short = kv_reads(40, 5, flash)  # contexts 41..44
    sliding_long, full_long = kv_reads(40, 9, flash)  # contexts 41..48
    # sliding: 32 keys per step · 2,048 B = 65,536 B per step, for 4 and 8 steps
    assert_allclose([sliding_short, sliding_long], [262_144, 524_288], rtol=1e-12)
    # full: 2,048 B · (41 + … + 44 = 170) and · (41 + … + 48 = 356)
    assert_allclose([full_short, full_long], [348_160, 729_088], rtol=1e-12)


@pytest.mark.parametrize("flash", [True, False])
def test_reads_across_the_window_edge(flash: bool) -> None:
    sliding, full = kv_reads(20, 17, flash)  # contexts 21..36 cross the window at 32
    # sliding: 2,048 B · (21 + … + 32 = 318, then 4 · 32 = 128) = 2,048 · 446
    assert_allclose(sliding, 913_408, rtol=1e-12)
    # full: 2,048 B · (21 + … + 36 = 456)
    assert_allclose(full, 933_888, rtol=1e-12)


def test_prefill_pairs_inside_the_window() -> None:
    prefill = estimate(ARCH, BATCH, 40, 1, deployment(A100_1_5TB)).prefill
    # FLOPs = 2 · batch 2 · 4 heads · pairs · (128 + 128) = 4,096 · pairs
    # sliding pairs: 32·33/2 + (40 - 32)·32 = 784; causal full pairs: 40·41/2 = 820
    assert_allclose(column_sum(prefill, "tensor_flops", {"attention_sliding"}), 3_211_264)
    assert_allclose(column_sum(prefill, "tensor_flops", {"attention"}), 3_358_720)


def test_kv_cache_footprint_holds_the_window() -> None:
    memory = estimate(ARCH, BATCH, 40, 9, deployment(A100_1_5TB)).memory
    # 49 tokens in the full layer + 32 in the sliding one, 1,024 B each, 2 sequences
    assert_allclose(memory.kv_cache_bytes_per_gpu, 2 * (49 + 32) * 1_024, rtol=1e-12)
