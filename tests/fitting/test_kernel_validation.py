"""Kernel validation against aiconfigurator's tables: hand-written rows mapped onto the cost
model's kernels (numbers worked by hand), the accuracy figures, and the command end to end."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from offline.fitting.metrics import accuracy
from offline.validation.kernel_ops import MAPPERS
from offline.validation.kernel_pricing import KernelCall, PricingContext, price_table
from offline.validation.kernel_report import row_cells
from offline.validation.kernel_tables import KernelTable, KernelTableFile
from service.core.coefficients import (
    IDEAL_ROOFLINE,
    CostModelCoefficients,
    EnergyInterval,
    PowerCoefficients,
)
from service.core.hardware import GpuSpec
from service.core.roofline import kernel_gpu_j

DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"
KERNELS = DATA_DIR / "aiconfigurator" / "kernels"

# A GPU with round numbers, so every expected time below is worked by hand.
GPU = GpuSpec(
    id="round",
    tensor_dense_flops_per_s={"bf16": 1000e12, "fp8": 2000e12},
    cuda_core_fp32_flops_per_s=50e12,
    special_function_ops_per_s=4e12,
    memory_bytes=80e9,
    memory_bandwidth_bytes_per_s=2e12,
    interconnect_bandwidth_bytes_per_s=400e9,
    interconnect_domain_gpus=8,  # the all-reduces below stay inside one domain
    scale_out_bandwidth_bytes_per_s=50e9,
    tdp_w=700.0,
    idle_w=100.0,
)
POWER = PowerCoefficients(
    compute=0.9, memory=0.6, network=0.5, host_overhead=0, host_per_sequence=0
)
COEFFS = CostModelCoefficients("test", IDEAL_ROOFLINE, POWER, EnergyInterval(1, 1, 0.1, 0.9))
CTX = PricingContext(GPU, COEFFS)


def _table(stem: str, engine: str = "vllm", **columns: list[Any]) -> KernelTable:
    file = KernelTableFile(f"x/{stem}.parquet", "h100_sxm", "op", engine, "0", stem)
    return KernelTable(file, dict(columns))


def _calls(stem: str, engine: str = "vllm", **row: Any) -> tuple[str, list[KernelCall], float]:
    table = _table(stem, engine, **{k: [v] for k, v in row.items()})
    mapped = MAPPERS[stem](table, 0, CTX)
    assert not isinstance(mapped, str), mapped
    return mapped


def test_gemm_row_counts_2mnk_flops_and_its_bytes() -> None:
    label, calls, _ = _calls("gemm_perf", gemm_dtype="bfloat16", m=128, n=4096, k=8192)
    work = calls[0].work
    assert label == "gemm bfloat16"
    assert work.tensor_flops == 2 * 128 * 4096 * 8192 == 8_589_934_592
    assert work.weight_bytes == 4096 * 8192 * 2  # bf16 weight read once
    assert work.activation_read_bytes == 128 * 8192 * 2
    assert work.activation_write_bytes == 128 * 4096 * 2
    # Memory-bound: 70,254,592 B / 2 TB/s = 35.127 us > 8.59 GFLOP / 1 PFLOP/s = 8.59 us.
    time_s, power_w = CTX.price(calls, 0.0)
    assert time_s == pytest.approx(35.127296e-6)
    # idle + (tdp - idle) x (0.9 x 8.590/35.127 + 0.6 x 1) = 100 + 600 x 0.820083
    assert power_w == pytest.approx(592.05, rel=1e-4)


def test_fp8_gemm_runs_on_the_fp8_peak_with_one_byte_weights() -> None:
    _, calls, _ = _calls("gemm_perf", gemm_dtype="fp8", m=4096, n=4096, k=4096)
    assert calls[0].compute_key == "fp8"
    assert calls[0].work.weight_bytes == 4096 * 4096
    # 2 x 4096^3 = 137.4 GFLOP at 2 PFLOP/s = 68.72 us; bytes 16.8 + 33.6 MB at 2 TB/s = 25 us.
    assert CTX.price(calls, 0.0)[0] == pytest.approx(2 * 4096**3 / 2000e12)


def test_context_attention_row_is_a_causal_prefill() -> None:
    row = dict(batch_size=2, isl=4, step=0, num_heads=8, num_key_value_heads=2, head_dim=64)
    label, calls, _ = _calls(
        "context_attention_perf", attn_dtype="bfloat16", kv_cache_dtype="bfloat16", **row
    )
    work = calls[-1].work
    assert label == "context attention"
    # 4 x 5 / 2 = 10 causal pairs per sequence and head; 2 x 8 x 10 = 160 scores; QK and SV
    # each 2 x 160 x 64 FLOP.
    assert work.tensor_flops == 2 * (2 * 160 * 64)
    # K and V of 4 tokens, 2 KV heads x 64, bf16, two sequences: 2 x 2 x 4 x 128 x 2 B, read by
    # the attention kernel after a kernel of their own appended them to the cache
    assert work.kv_cache_read_bytes == 4096
    assert len(calls) == 2 and not calls[0].streaming
    assert calls[0].work.kv_cache_write_bytes == 4096 and work.kv_cache_write_bytes == 0


def test_generation_attention_reads_isl_plus_step_keys() -> None:
    row = dict(batch_size=4, isl=1, step=15, num_heads=8, num_key_value_heads=2, head_dim=64)
    label, calls, _ = _calls(
        "generation_attention_perf", attn_dtype="bfloat16", kv_cache_dtype="fp8", **row
    )
    work = calls[-1].work
    assert label == "generation attention"
    assert work.tensor_flops == 2 * (2 * 4 * 8 * 16 * 64)  # 16 keys per sequence
    assert work.kv_cache_read_bytes == 4 * 16 * 2 * 128 * 1  # fp8 cache: 1 B per element


def test_mla_context_row_is_unabsorbed_except_sglangs() -> None:
    row = dict(batch_size=2, isl=4, step=0, num_heads=16, kv_cache_dtype="bfloat16")
    label, calls, _ = _calls("context_mla_perf", **row)
    assert label == "mla context"
    # 2 sequences x 16 heads x 10 causal pairs = 320 scores; QK 192 + V 128 per head
    assert calls[-1].work.tensor_flops == 2 * 320 * (192 + 128) == 204_800
    # SGLang's collector times the absorbed layout on Hopper: QK 576 + V 512
    _, calls, _ = _calls("context_mla_perf", "sglang", **row)
    assert calls[-1].work.tensor_flops == 2 * 320 * (576 + 512) == 696_320


def test_mla_generation_row_is_absorbed_over_the_latent() -> None:
    row = dict(batch_size=4, isl=1, step=15, num_heads=16, kv_cache_dtype="bfloat16")
    label, calls, _ = _calls("generation_mla_perf", **row)
    work = calls[-1].work
    assert label == "mla generation"
    # 4 sequences x 16 heads x 16 keys = 1,024 scores over the 576 / 512 latent
    assert work.tensor_flops == 2 * 1024 * (576 + 512) == 2_228_224
    assert work.kv_cache_read_bytes == 4 * 16 * 576 * 2  # the latent read once, bf16


def test_sliding_window_prefill_caps_each_query_at_the_window() -> None:
    row = dict(batch_size=1, isl=8, step=0, num_heads=1, num_key_value_heads=1, head_dim=64)
    label, calls, _ = _calls(
        "context_attention_perf",
        attn_dtype="bfloat16",
        kv_cache_dtype="bfloat16",
        window_size=4,
        **row,
    )
    assert label == "context attention (sliding window)"
    pairs = 1 + 2 + 3 + 4 + 4 + 4 + 4 + 4  # min(c, 4) for c = 1..8
    assert calls[-1].work.tensor_flops == 2 * (2 * pairs * 64)


def test_moe_row_is_gate_up_activation_down_over_the_touched_experts() -> None:
    label, calls, _ = _calls(
        "moe_perf",
        moe_dtype="bfloat16",
        kernel_source="vllm_fused_moe",
        num_tokens=1,
        hidden_size=1024,
        inter_size=512,
        topk=2,
        num_experts=8,
        moe_tp_size=1,
        moe_ep_size=1,
        distribution="power_law_1.01",
    )
    up, act, down = (c.work for c in calls)
    assert label == "moe bfloat16 (power-law routing)"
    # One token picks 2 experts: 2 rows through a 1024 x (2 x 512) gated GEMM each.
    assert up.tensor_flops == 2 * 2 * 1024 * 1024
    assert up.weight_bytes == 2 * 1024 * 1024 * 2  # two touched experts' bf16 weights
    assert down.tensor_flops == 2 * 2 * 512 * 1024
    assert act.tensor_flops == 0 and not calls[1].streaming


def test_all_reduce_row_is_a_ring_over_the_gpus() -> None:
    label, calls, _ = _calls(
        "custom_allreduce_perf", message_size=1_048_576, num_gpus=4, backend="vllm_graph"
    )
    work = calls[-1].work
    assert label == "all-reduce"
    assert work.network_bytes == 2 * 3 / 4 * 1_048_576 * 2  # 2 (n-1)/n of 2 MiB
    assert work.collective_steps == 6


def test_price_table_counts_rows_it_cannot_price_by_reason() -> None:
    table = _table(
        "gemm_perf",
        gemm_dtype=["bfloat16", "bfloat16", "nvfp4", "fp8"],
        m=[1, 1, 1, 1],
        n=[8, 8, 8, 8],
        k=[8, 8, 8, 8],
        latency=[0.01, 0.0, 0.01, 0.01],
    )
    rows = price_table(table, MAPPERS["gemm_perf"], CTX)
    assert rows.op == ["gemm bfloat16", "gemm fp8"]
    assert rows.measured_s == [1e-5, 1e-5]
    assert dict(rows.skipped) == {"no positive latency": 1, "gemm dtype nvfp4": 1}
    # A GPU without fp8 tensor cores (an A100): the cost model refuses the fp8 row.
    no_fp8 = PricingContext(replace(GPU, tensor_dense_flops_per_s={"bf16": 1000e12}), COEFFS)
    rows = price_table(table, MAPPERS["gemm_perf"], no_fp8)
    assert rows.op == ["gemm bfloat16"]
    assert rows.skipped["UnsupportedPrecision"] == 1


def test_accuracy_figures_on_hand_numbers() -> None:
    measured = np.array([100.0, 100.0, 100.0, 100.0])
    predicted = np.array([110.0, 80.0, 100.0, 150.0])  # errors 10, 20, 0, 50 %
    acc = accuracy(predicted, measured)
    assert acc.mape_pct == pytest.approx(20.0)
    assert acc.within_10_pct == 50.0  # 10 % and 0 %
    assert acc.within_30_pct == 75.0
    assert row_cells(acc) == ["4", "20.0", "50", "75", "+5"]  # median ratio (1.0 + 1.1) / 2


def test_kernel_gpu_j_caps_dynamic_power_at_tdp() -> None:
    # busy = 0.9 x 0.5 + 0.6 x 0.5 = 0.75 s of the 1 s: 100 + 600 x 0.75 = 550 J
    assert kernel_gpu_j(GPU, POWER, 1.0, 0.5, 0.5, 0.0) == pytest.approx(550.0)
    assert kernel_gpu_j(GPU, POWER, 1.0, 1.0, 1.0, 1.0) == pytest.approx(700.0)


@pytest.mark.skipif(not KERNELS.is_dir(), reason="measured data not present")
def test_command_writes_the_report_for_a_subset(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from offline.validation.kernels import main

    out = tmp_path / "kernel_validation.md"
    main(
        [
            *("--data", str(DATA_DIR), "--gpus", "h200_sxm"),
            *("--tables", "gemm_perf", "custom_allreduce_perf"),
            *("--max-rows", "150", "--out", str(out), "--no-progress"),
        ]
    )
    text = out.read_text(encoding="utf-8")
    assert "| gemm bfloat16 | h200_sxm | vllm | 0.22.0, 0.24.0 |" in text
    assert "| all-reduce | h200_sxm | trtllm |" in text
    power = text.split("## Power")[1].split("## Not priced")[0]
    assert "| gemm bfloat16 | h200_sxm | vllm | 0.22.0 |" in power  # only 0.22.0 measured power


def test_dsa_module_row_is_the_attention_block_with_the_indexer() -> None:
    row = dict(
        batch_size=1, isl=1, step=4095, num_heads=16, kv_cache_dtype="bfloat16",
        gemm_type="bfloat16", model="deepseek-ai/DeepSeek-V3.2",
    )  # fmt: skip
    label, calls, _ = _calls("dsa_generation_module_perf", **row)
    assert label == "dsa module generation"
    flops = [c.work.tensor_flops for c in calls]
    # qkv_proj, the q_a and kv_a norms, rope, kv_b_proj, the indexer's 5 kernels (k norm,
    # RoPE, fp8 quantisation, logits, top-k), sparse attention, o_proj
    assert len(calls) == 12
    # the indexer scores all 4,096 keys: 2 x 64 heads x 128 x 4,096 = 67,108,864 FLOP
    assert 67_108_864 in flops
    # attention reads the top 2,048 absorbed, its 16 heads padded to FlashMLA's 64:
    # 2 x 64 heads x 2,048 x (576 + 512) = 285,212,672
    assert 285_212_672 in flops
    # GLM-5's DSA rows have other shapes: not priced
    assert (
        MAPPERS["dsa_generation_module_perf"](
            _table(
                "dsa_generation_module_perf",
                **{k: [v] for k, v in {**row, "model": "zai-org/GLM-5"}.items()},
            ),
            0,
            CTX,
        )
        == "dsa module of zai-org/GLM-5"
    )
