"""The Mamba-2 and gated-DeltaNet rows of aiconfigurator's kernel tables as the cost model's
kernels (offline.validation.recurrent_ops): counts worked by hand, and the row mapper the
kernel validation report prices them through."""

from __future__ import annotations

from typing import Any

from offline.validation.kernel_ops import MAPPERS
from offline.validation.kernel_pricing import KernelCall, PricingContext
from offline.validation.kernel_tables import KernelTable, KernelTableFile
from offline.validation.recurrent_ops import row_work
from service.catalog import load_cost_model_coefficients
from service.catalog.gpus import load_gpu_catalog

# A gated-DeltaNet decode row: 4 sequences, 2 key heads and 4 value heads of 128.
GDN_DECODE: dict[str, Any] = {
    "op_name": "gdn", "kernel_source": "fused_recurrent_gated_delta_rule_packed_decode",
    "phase": "generation", "batch_size": 4, "seq_len": 1, "num_tokens": 4, "d_model": 1024,
    "d_conv": 4, "num_k_heads": 2, "head_k_dim": 128, "num_v_heads": 4, "head_v_dim": 128,
    "model_name": "Qwen/Qwen3.5-0.8B", "latency": 0.005,
}  # fmt: skip
MAMBA_PREFILL: dict[str, Any] = {
    "op_name": "mamba2", "kernel_source": "causal_conv1d_fn", "phase": "context",
    "batch_size": 2, "seq_len": 100, "num_tokens": 200, "d_model": 4096, "d_state": 128,
    "d_conv": 4, "nheads": 64, "head_dim": 64, "n_groups": 8, "chunk_size": 256,
    "model_name": "MAMBA2_GENERIC_4K", "latency": 0.01,
}  # fmt: skip


def test_a_decode_row_reads_and_writes_each_fp32_state_once() -> None:
    """4 sequences x 4 heads x 128 x 128 fp32 = 1,048,576 B read and as many written."""
    label, work, streaming = row_work(GDN_DECODE, load_gpu_catalog().get("H100-SXM5-80GB").spec)
    assert label == "gdn delta_rule (generation)" and streaming
    assert work.kv_cache_read_bytes == work.kv_cache_write_bytes == 4 * 4 * 128 * 128 * 4


def test_a_conv_row_is_the_tokens_of_all_sequences() -> None:
    """200 tokens x (64 x 64 + 2 x 8 x 128 = 6144 channels) x (2 x 4 taps + 5) ops; the conv
    state of 2 sequences, 3 x 6144 bf16 each, read and written."""
    label, work, streaming = row_work(MAMBA_PREFILL, load_gpu_catalog().get("H200-SXM-141GB").spec)
    assert label == "mamba2 causal_conv1d (context)" and not streaming
    assert work.cuda_core_ops == 200 * 6144 * 13
    assert work.kv_cache_read_bytes == 2 * 3 * 6144 * 2


def _table(stem: str, rows: list[dict[str, Any]]) -> KernelTable:
    file = KernelTableFile(f"x/{stem}.parquet", "h100_sxm", "linear_attention", "vllm", "0", stem)
    return KernelTable(file, {key: [row[key] for row in rows] for key in rows[0]})


def test_the_report_prices_both_tables_through_row_work_with_one_launch() -> None:
    gpu = load_gpu_catalog().get("H100-SXM5-80GB").spec
    ctx = PricingContext(gpu, load_cost_model_coefficients())
    for stem, row in (("gdn_perf", GDN_DECODE), ("mamba2_perf", MAMBA_PREFILL)):
        label, work, streaming = row_work(row, gpu)
        assert MAPPERS[stem](_table(stem, [row]), 0, ctx) == (
            label, [KernelCall(work, "bf16", streaming)], ctx.launch_s,
        )  # fmt: skip


def test_a_kernel_the_cost_model_does_not_count_is_a_reason() -> None:
    gpu = load_gpu_catalog().get("H100-SXM5-80GB").spec
    ctx = PricingContext(gpu, load_cost_model_coefficients())
    row = {**GDN_DECODE, "kernel_source": "some_new_kernel"}
    assert MAPPERS["gdn_perf"](_table("gdn_perf", [row]), 0, ctx) == (
        "kernel some_new_kernel is not one the cost model counts"
    )


# A Kimi Delta Attention decode row (Kimi-K3's shapes on one GPU: 12 heads of 128).
KDA_DECODE: dict[str, Any] = {
    "op_name": "kda", "kernel_source": "fused_recurrent_kda_packed_decode", "phase": "generation",
    "batch_size": 2, "seq_len": 1, "num_tokens": 2, "d_model": 7168, "d_conv": 4,
    "num_k_heads": 12, "head_k_dim": 128, "num_v_heads": 12, "head_v_dim": 128,
    "model_name": "moonshotai/Kimi-K3", "latency": 0.006,
}  # fmt: skip


def test_a_kda_decode_row_updates_each_fp32_state_once() -> None:
    """2 sequences x 12 heads x 128 x 128 fp32 = 1,572,864 B read and as many written; the
    update 7 ops per state element, the per-channel gate 6 ops per key channel and token."""
    label, work, streaming = row_work(KDA_DECODE, load_gpu_catalog().get("H200-SXM-141GB").spec)
    assert label == "kda delta_rule (generation)" and streaming
    assert work.kv_cache_read_bytes == work.kv_cache_write_bytes == 2 * 12 * 128 * 128 * 4
    per_token = 12 * (2 * 64 + 6 * 128) + 6 * 12 * 128 + 3 * 2 * 16 * 12 * 128
    assert work.cuda_core_ops == 2 * per_token + 2 * 7 * 12 * 128 * 128


def test_speculative_verify_rows_are_not_priced() -> None:
    gpu = load_gpu_catalog().get("H200-SXM-141GB").spec
    ctx = PricingContext(gpu, load_cost_model_coefficients())
    verify = {**KDA_DECODE, "phase": "verify", "kernel_source": "fused_recurrent_kda"}
    reason = MAPPERS["kda_perf"](_table("kda_perf", [verify]), 0, ctx)
    assert reason == "verify rows (speculative decoding) are not priced"
