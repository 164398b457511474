"""A committed measurement campaign's rows in the fit: kernel power priced by the cost model,
end-to-end rows as the hf-transformers engine, the power fit using both; none, no change.
Which readings are kept: kernel power from the trace where it shows enough meter updates,
end-to-end energy where its metered span lasted 10 meter periods, times always."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from offline.fitting.campaign_rows import (
    Dropped,
    campaign_end_to_end_rows,
    campaign_provenance,
    campaign_versions,
    kernel_power_rows,
)
from offline.fitting.cross_validation import _fit_power_per_engine
from offline.fitting.end_to_end import predicted_per_sequence_j
from offline.measure.budget import CampaignRun
from offline.measure.campaign_output import Campaign, committed_campaigns
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import load_cost_model_coefficients
from tests.measure.campaign_support import alternating_trace as trace
from tests.measure.campaign_support import write_test_campaign

H100 = "H100-SXM5-80GB"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen3-30B-A3B"


def gemm(m: int, n: int = 28672, k: int = 4096, latency_ms: float = 1.0) -> dict[str, object]:
    # `power`, the energy counter's mean, is not what the reader takes: the trace's is.
    item = f"gemm m={m}"
    return {"item": item, "m": m, "n": n, "k": k, "gemm_dtype": "bfloat16"} | {
        "latency": latency_ms,
        "power": 999.0,
    }


def phases(model: str, layers: int, delta: int, batch: int, prompt: int) -> list[dict[str, object]]:
    item = f"{model} b={batch} p={prompt}"
    common = {"item": item, "case": "x", "model": model, "num_layers": layers}
    common |= {"layers_delta": delta, "batch_size": batch, "prompt_tokens": prompt}
    common |= {"output_tokens": 64, "engine": "hf-transformers"}
    times = {"prefill": 0.05 * batch * prompt / 512, "decode": 0.63 * (1 + batch / 16)}
    times["request"] = times["prefill"] + times["decode"]
    return [{**common, "phase": p, "gpu_j": 400.0 * t, "time_s": t} for p, t in times.items()]


def campaign(tmp_path: Path) -> Campaign:
    run = CampaignRun()
    run.rows["gemm_perf"] = [gemm(m) for m in (1, 16, 256, 1024, 4096, 16384, 32768)]
    run.rows["power_samples"] = [
        *(s for m in (1, 16, 256, 1024, 4096, 16384) for s in trace(f"gemm m={m}", 500.0)),
        *trace("gemm m=32768", 500.0, updates=4),  # too few updates: dropped
        *trace("moe", 450.0),
    ]
    run.rows["moe_perf"] = [
        {
            "item": "moe",
            "num_tokens": 1024,
            "hidden_size": 2048,
            "inter_size": 768,
            "topk": 8,
            "num_experts": 128,
            "moe_tp_size": 1,
            "moe_ep_size": 1,
            "moe_dtype": "bfloat16",
            "distribution": "balanced",
            "kernel_source": "torch.bmm gated, equal groups",
            "latency": 0.2,
            "power": 450.0,
        }
    ]
    run.rows["end_to_end"] = [
        row
        for model, layers, delta in ((LLAMA, 32, 0), (QWEN, 12, -36))
        for batch in (1, 4, 16)
        for prompt in (512, 2048)
        for row in phases(model, layers, delta, batch, prompt)
    ]
    write_test_campaign(
        tmp_path / "2026-11-26-h100",
        run,
        gpu=H100,
        gpu_name="NVIDIA H100 80GB HBM3",
        torch_version="2.13.0+cu128",
        cuda_version="12.8",
        elapsed_s=400.0,
    )
    (found,) = committed_campaigns(tmp_path)
    return found


def test_kernel_rows_are_priced_by_the_roofline(tmp_path: Path) -> None:
    coefficients = load_cost_model_coefficients()
    dropped = Dropped()
    rows = kernel_power_rows([campaign(tmp_path)], coefficients, load_gpu_catalog(), dropped)
    assert rows is not None and len(rows.measured_w) == 7
    # m = 32768's trace shows 4 meter updates, fewer than 5: dropped and counted. The rest
    # read the traces' time-weighted means (500 W), not the counter's 999 W.
    assert dropped == {"kernel: trace shows < 5 meter updates": 1}
    assert rows.measured_w[:6] == pytest.approx([500.0] * 6)
    # m = 4096 is a whole number of 64-row tiles: 2 m n k FLOPs at the bf16 dense peak
    # (989.4 TFLOP/s) times the fitted tensor-core efficiency.
    peak = 989.4e12 * coefficients.roofline.tensor_efficiency
    assert rows.compute_s[4] == pytest.approx(2 * 4096 * 28672 * 4096 / peak, rel=1e-9)
    # Memory: bf16 weights k x n, activations m x k in and m x n out, at the fitted rate of
    # 3.35 TB/s.
    bytes_moved = 2 * (4096 * 28672 + 4096 * 4096 + 4096 * 28672)
    rate = 3.35e12 * coefficients.roofline.memory_efficiency
    assert rows.memory_s[4] == pytest.approx(bytes_moved / rate, rel=1e-9)
    # 81 W idle, 700 W TDP: m = 256 (4 tiles) busy at fraction 1 for its compute time of its
    # 1 ms; m = 4096 needs more than 1 ms of compute, capped at TDP.
    share = 2 * 256 * 28672 * 4096 / peak / 1e-3
    predicted = rows.predicted_w(np.array([1.0, 0.0, 0.0]))
    assert predicted[2] == pytest.approx(81.0 + 619.0 * share)
    assert predicted[4] == pytest.approx(700.0)
    assert rows.time_s[6] == pytest.approx(2e-4)  # the MoE row
    assert rows.measured_w[6] == pytest.approx(450.0)
    # Grouped validation holds rows out by the family whose shapes they sweep: the GEMMs are
    # Llama-3.1-8B's, the MoE layer Qwen3-30B-A3B's.
    assert rows.family == ("llama",) * 6 + ("qwen",) and set(rows.gpu_id) == {H100}
    without_qwen = rows.subset(np.array([f != "qwen" for f in rows.family]))
    assert without_qwen is not None and len(without_qwen.time_s) == 6
    assert without_qwen.measured_w == pytest.approx([500.0] * 6)
    assert rows.subset(np.zeros(7, dtype=bool)) is None


def test_end_to_end_rows_are_the_hf_transformers_engine(tmp_path: Path) -> None:
    found = campaign(tmp_path)
    coefficients = load_cost_model_coefficients()
    models, gpus = load_model_catalog(), load_gpu_catalog()
    dropped = Dropped()
    rows = campaign_end_to_end_rows([found], models, gpus, coefficients, dropped)
    assert len(rows) == 12 and {r.engine for r in rows} == {"hf-transformers"}
    first = rows[0]  # Llama, batch 1, prompt 512: decode 0.63 x 17/16 s over 63 steps
    assert first.measured_tpot_s == pytest.approx(0.63 * 17 / 16 / 63)
    assert first.measured_prefill_s == pytest.approx(0.05)
    assert (first.gpu_id, first.decode_steps, first.family) == (H100, 63, "llama")
    # The traces update every 0.1 s, so a request's energy needs a 1 s span. Batch 1,
    # prompt 512: 0.05 + 0.669 s, no energy. Batch 4, prompt 2048: prefill 0.05 x 4 x 4 =
    # 0.8 s, decode 0.63 x 1.25 = 0.7875 s, together 1.5875 s: 400 W x 1.5875 s / 4 sequences.
    assert first.measured_per_sequence_j is None
    b4 = rows[3]
    assert (b4.batch_size, b4.measured_per_sequence_j) == (4, pytest.approx(400 * 1.5875 / 4))
    # Spans under 1 s: batch 1 at both prompts (0.719, 0.869 s), batch 4 at 512 (0.9875 s),
    # for both models.
    assert dropped == {"end to end energy: span < 10 meter periods": 6}
    assert [r.measured_per_sequence_j is None for r in rows[:6]] == [True] * 3 + [False] * 3
    moe = next(r for r in rows if r.model_id == QWEN)
    assert moe.prefill.compute_s.sum() < rows[0].prefill.compute_s.sum()  # 12 of 48 layers
    assert campaign_versions([found]) == ["2.13.0+cu128"]
    recorded = campaign_provenance([found], dropped)
    (run,) = recorded["runs"]
    assert run["gpu"] == H100 and run["rows"]["end_to_end"] == 36
    assert run["meter_update_period_s"] == pytest.approx(0.1)
    assert recorded["dropped"] == {"end to end energy: span < 10 meter periods": 6}


def test_energy_spans_phases_run_back_to_back_and_needs_a_meter_period(tmp_path: Path) -> None:
    found = campaign(tmp_path)
    models, gpus = load_model_catalog(), load_gpu_catalog()
    coefficients = load_cost_model_coefficients()
    table = found.tables["end_to_end"]
    # A harness that ran each phase back to back records the metered span: 1.2 s for every
    # phase keeps every energy, even batch 1's 0.719 s request.
    spans = replace(found, tables={**found.tables, "end_to_end": {**table, "span_s": [1.2] * 36}})
    rows = campaign_end_to_end_rows([spans], models, gpus, coefficients)
    assert rows[0].measured_per_sequence_j == pytest.approx(400.0 * (0.05 + 0.63 * 17 / 16))
    # No traces and no recorded period: no energies (times kept), all twelve counted.
    bare = replace(found, tables={"end_to_end": table})
    dropped = Dropped()
    rows = campaign_end_to_end_rows([bare], models, gpus, coefficients, dropped)
    assert all(r.measured_per_sequence_j is None for r in rows) and len(rows) == 12
    assert dropped == {"end to end energy: no meter period detected": 12}
    # A period recorded in the provenance (0.05 s: 0.5 s spans suffice) stands in.
    recorded = replace(bare, provenance={**found.provenance, "meter_update_period_s": 0.05})
    rows = campaign_end_to_end_rows([recorded], models, gpus, coefficients)
    assert all(r.measured_per_sequence_j is not None for r in rows)


def test_the_power_fit_recovers_fractions_from_campaign_rows(tmp_path: Path) -> None:
    found = campaign(tmp_path)
    coefficients = load_cost_model_coefficients()
    gpus = load_gpu_catalog()
    rows = campaign_end_to_end_rows([found], load_model_catalog(), gpus, coefficients)
    overheads = {"hf-transformers": (0.02, 4e-3, 1e-5, 2e-6, 0.0)}
    truth = np.array([0.9, 0.6, 0.5, 0.3, 0.5])
    rows = [
        replace(
            r,
            measured_per_sequence_j=float(
                predicted_per_sequence_j([r], overheads["hf-transformers"], truth)[0]
            ),
        )
        for r in rows
    ]
    kernels = kernel_power_rows([found], coefficients, gpus)
    assert kernels is not None
    slow = 1.25 * np.maximum(kernels.compute_s, kernels.memory_s)  # below the TDP cap
    kernels = replace(kernels, time_s=slow)
    kernels = replace(kernels, measured_w=kernels.predicted_w(truth[:3]))
    power, overhead_power = _fit_power_per_engine(rows, overheads, kernels)
    assert power[:2] == pytest.approx(truth[:2], rel=1e-3)
    assert overhead_power["hf-transformers"] == pytest.approx(tuple(truth[3:]), rel=1e-3)
    # The kernel rows pull the shared fractions: fitted to them alone with other power,
    # the fit moves off the end-to-end truth.
    off = replace(kernels, measured_w=kernels.predicted_w(np.array([0.5, 0.3, 0.0])))
    moved, _ = _fit_power_per_engine(rows, overheads, off)
    assert abs(moved[0] - truth[0]) > 0.05


def test_without_a_campaign_nothing_is_added(tmp_path: Path) -> None:
    assert committed_campaigns(tmp_path / "absent") == []
    coefficients, gpus = load_cost_model_coefficients(), load_gpu_catalog()
    assert kernel_power_rows([], coefficients, gpus) is None
    assert campaign_end_to_end_rows([], load_model_catalog(), gpus, coefficients) == []
