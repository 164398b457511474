"""A second attention shape: sliding-window layers with their own heads and head sizes (Gemma 4,
MiMo-V2-Flash) have their own projections, attention kernel and KV-cache width."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from core_support import A100_1_5TB, IDEAL, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.architecture import AttentionShape, ModelArchitecture, validate_architecture
from service.core.cost_model_errors import InvalidArchitecture, InvalidParallelism
from service.core.estimate import pricing_context
from service.core.memory import parameter_count
from service.core.pass_plans import ContextRows
from service.core.schedule import kv_cache_bytes_many

# 3 layers: 1 full of 2 KV heads x 64 (keys also the values: no v_proj), 2 sliding ones with a
# 16-token window of 4 KV heads, keys of 32 and values of 16; 8 query heads everywhere.
# KV per token: full 2 x 64 x 2 = 256 elements, sliding 4 x (32 + 16) = 192 elements.
ARCH = ModelArchitecture(
    hidden_size=256,
    num_layers=3,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=64,
    intermediate_size=512,
    vocab_size=1000,
    sliding_window_tokens=16,
    num_sliding_window_layers=2,
    values_from_keys=True,
    sliding_attention=AttentionShape(8, 4, 32, 16),
)
BATCH = 2


def test_weights_of_each_layer_kind_by_hand() -> None:
    # full: q 256 x 512, k 256 x 128 (no v), o 512 x 256 = 294,912
    # sliding: q 256 x 256, k 256 x 128, v 256 x 64, o 128 x 256 = 147,456 each
    # MLPs 3 x 3 x 256 x 512 = 1,179,648; untied tables 2 x 1000 x 256 = 512,000
    assert parameter_count(ARCH) == 294_912 + 2 * 147_456 + 1_179_648 + 512_000


def test_projections_per_layer_kind() -> None:
    prefill = estimate(ARCH, BATCH, 40, 1, deployment(A100_1_5TB)).prefill
    tokens = BATCH * 40
    # qkv_proj: 2 x tokens x 256 x (512 + 128); the sliding layers': 2 x tokens x 256 x 448
    assert_allclose(column_sum(prefill, "tensor_flops", {"qkv_proj"}), 2 * tokens * 256 * 640)
    sliding_qkv = column_sum(prefill, "tensor_flops", {"qkv_proj_sliding"})
    assert_allclose(sliding_qkv, 2 * (2 * tokens * 256 * 448))
    # o_proj reads the heads' values: 8 x 64 for full, 8 x 16 for sliding layers
    assert_allclose(column_sum(prefill, "tensor_flops", {"o_proj"}), 2 * tokens * 512 * 256)
    assert_allclose(
        column_sum(prefill, "tensor_flops", {"o_proj_sliding"}), 2 * (2 * tokens * 128 * 256)
    )


def test_attention_flops_at_each_shape() -> None:
    prefill = estimate(ARCH, BATCH, 40, 1, deployment(A100_1_5TB)).prefill
    # full: 2 x batch 2 x 8 heads x 40 x 41 / 2 pairs x (64 + 64)
    assert_allclose(column_sum(prefill, "tensor_flops", {"attention"}), 2 * 2 * 8 * 820 * 128)
    # sliding: pairs 16 x 17 / 2 + 24 x 16 = 520, x (32 + 16), on 2 layers
    sliding = column_sum(prefill, "tensor_flops", {"attention_sliding"})
    assert_allclose(sliding, 2 * (2 * 2 * 8 * 520 * 48))


def test_decode_reads_each_layers_own_cache() -> None:
    decode = estimate(ARCH, BATCH, 40, 5, deployment(A100_1_5TB)).decode
    # 4 decode steps at contexts 41..44; bf16: full 512 B per key, sliding 384 B per key
    full = column_sum(decode, "kv_cache_read_bytes", {"attention"})
    assert_allclose(full, BATCH * 512 * (41 + 42 + 43 + 44))
    sliding = column_sum(decode, "kv_cache_read_bytes", {"attention_sliding"})
    assert_allclose(sliding, 2 * BATCH * 384 * 16 * 4)


def test_kv_cache_bytes_of_a_mixed_stack_by_hand() -> None:
    """49 tokens: the full layer holds 49 x 512 B, each sliding layer 16 x 384 B, per sequence;
    the pricing pass's per-context rows give the same bytes."""
    by_hand = BATCH * (49 * 512 + 2 * 16 * 384)
    memory = estimate(ARCH, BATCH, 40, 9, deployment(A100_1_5TB)).memory
    assert memory.kv_cache_bytes_per_gpu == pytest.approx(by_hand, rel=1e-12)
    context = pricing_context(ARCH, deployment(A100_1_5TB), IDEAL)
    rows = ContextRows.of([context], np.zeros(1, dtype=np.intp))
    many = kv_cache_bytes_many(rows, np.array([float(BATCH)]), np.array([49.0]))
    assert many[0] == pytest.approx(by_hand, rel=1e-12)


def test_tensor_parallel_splits_both_shapes() -> None:
    # 2 GPUs: full layers 1 KV head each, sliding 2: K+V per GPU halves for both
    one = estimate(ARCH, BATCH, 40, 9, deployment(A100_1_5TB)).memory.kv_cache_bytes_per_gpu
    two = deployment(A100_1_5TB, tensor=2)
    assert estimate(ARCH, BATCH, 40, 9, two).memory.kv_cache_bytes_per_gpu == pytest.approx(
        one / 2, rel=1e-12
    )
    with pytest.raises(InvalidParallelism):  # 3 sliding KV heads do not split over 2
        bad = replace(ARCH, sliding_attention=AttentionShape(6, 3, 32, 16), num_attention_heads=6)
        estimate(bad, BATCH, 40, 9, two)


def test_second_shape_needs_sliding_layers() -> None:
    with pytest.raises(InvalidArchitecture) as raised:
        validate_architecture(
            replace(ARCH, num_sliding_window_layers=0, sliding_window_tokens=None)
        )
    assert raised.value.field == "sliding_attention"
