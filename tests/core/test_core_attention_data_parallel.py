"""Attention data parallelism: replicas of attention over a stage whose experts span it."""

from __future__ import annotations

import pytest
from numpy.testing import assert_allclose

from service.core.cost_model_errors import InvalidParallelism
from service.core.estimate import estimate_request
from service.core.shards import shard_shapes
from service.core.workload import Deployment, Parallelism, Precision, Workload
from tests.core.core_support import IDEAL, catalog_arch, catalog_gpu

QWEN3_30B = "Qwen/Qwen3-30B-A3B"  # 48 MoE layers, hidden 2048, 32 heads, 4 KV heads, top-8
H100 = "H100-SXM5-80GB"
PREFILL = Workload(batch_size=4, prompt_tokens=256, output_tokens=1)  # one 1024-token pass


def _estimate(parallelism: Parallelism) -> dict[str, float]:
    deployment = Deployment(catalog_gpu(H100), parallelism, Precision())
    estimate = estimate_request(
        catalog_arch(QWEN3_30B), PREFILL, deployment, IDEAL, check_memory=False
    )
    table = estimate.prefill.table
    return {
        name: float(table.column(name).sum())
        for name in ("network_bytes", "tensor_flops", "kv_cache_write_bytes")
    }


def test_attention_replicas_hold_whole_heads() -> None:
    dp = shard_shapes(
        catalog_arch(QWEN3_30B),
        Deployment(catalog_gpu(H100), Parallelism(tensor=1, expert=4, data=4), Precision()),
    )
    assert (dp.group, dp.attention_group, dp.heads, dp.local_experts) == (4, 1, 32, 32)
    assert dp.kv_cache_width == 2 * 4 * 128


def test_data_parallel_attention_moves_only_the_all_to_all() -> None:
    # Attention DP 4 x EP 4: no all-reduce or all-gather (one GPU per attention replica);
    # dispatch and combine move, per GPU and direction, 1024 / 4 tokens x 8 experts x 2048 x
    # 2 B x 3/4 remote = 6,291,456 B; x 2 directions x 48 layers x 4 GPUs = 2,415,919,104 B.
    assert_allclose(
        _estimate(Parallelism(tensor=1, expert=4, data=4))["network_bytes"], 2_415_919_104.0
    )


def test_data_parallel_attention_does_the_same_arithmetic_less_the_replicated_router() -> None:
    # Replicas split the sequences: the FLOPs and KV writes summed over GPUs are those of
    # attention sharded tensor-parallel over the four GPUs, except the router GEMM, which
    # tensor parallelism replicates on every GPU: 3 extra copies of 2 x 1024 tokens x 2048 x
    # 128 experts x 48 layers = 77,309,411,328 FLOP.
    dp = _estimate(Parallelism(tensor=1, expert=4, data=4))
    tp = _estimate(Parallelism(tensor=1, expert=4))
    assert_allclose(tp["tensor_flops"] - dp["tensor_flops"], 77_309_411_328.0, rtol=1e-9)
    assert_allclose(dp["kv_cache_write_bytes"], tp["kv_cache_write_bytes"], rtol=1e-12)
    assert dp["network_bytes"] < tp["network_bytes"]


def test_data_parallel_moe_needs_experts_over_the_whole_stage() -> None:
    deployment = Deployment(catalog_gpu(H100), Parallelism(tensor=2, expert=2, data=4), Precision())
    with pytest.raises(InvalidParallelism, match=r"set parallelism\.expert to 4"):
        shard_shapes(catalog_arch(QWEN3_30B), deployment)
