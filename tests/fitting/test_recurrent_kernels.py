"""The cost model's prices of aiconfigurator's linear-attention kernel rows
(offline.fitting.recurrent_kernels): counts worked by hand, and the report's tables rewritten
between their markers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offline.fitting.recurrent_kernels import row_power_w, row_time_s, row_work, write_report
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


def test_time_and_power_are_positive_and_power_within_the_board() -> None:
    assert row_time_s(GDN_DECODE, "h100_sxm") > 0
    assert 81.0 <= row_power_w(GDN_DECODE, "h200_sxm") <= 700.0  # H200 idle to TDP


def test_the_report_tables_are_rewritten_between_their_markers(tmp_path: Path) -> None:
    folder = tmp_path / "aiconfigurator/kernels/h100_sxm/linear_attention/vllm/0.24.0"
    folder.mkdir(parents=True)
    rows = [GDN_DECODE, {**GDN_DECODE, "batch_size": 8, "latency": 0.006}]
    pq.write_table(pa.Table.from_pylist(rows), folder / "gdn_perf.parquet")
    report = tmp_path / "report.md"
    report.write_text("intro\n<!-- latency -->\nold\n<!-- /latency -->\nmid\n"
                      "<!-- power -->\n<!-- /power -->\nend\n")  # fmt: skip
    write_report(tmp_path, report)
    text = report.read_text()
    assert "old" not in text and text.startswith("intro") and text.endswith("end\n")
    line = next(x for x in text.splitlines() if x.startswith("| gdn"))
    assert line.split(" | ")[:6] == [
        "| gdn", "fused_recurrent_gated_delta_rule_packed_decode", "generation", "h100_sxm",
        "vllm 0.24.0", "2",
    ]  # fmt: skip
    measured = [0.005e-3, 0.006e-3]
    predicted = [row_time_s(r, "h100_sxm") for r in rows]
    mape = 100 * sum(abs(p - m) / m for p, m in zip(predicted, measured, strict=True)) / 2
    assert float(line.split(" | ")[6]) == pytest.approx(mape, abs=0.05)
