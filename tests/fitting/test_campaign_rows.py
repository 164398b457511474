"""A committed measurement campaign's rows in the fit: kernel power priced by the cost model,
end-to-end rows as the hf-transformers engine, the power fit using both; none, no change."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from offline.fitting.campaign_rows import (
    campaign_end_to_end_rows,
    campaign_provenance,
    campaign_versions,
    kernel_power_rows,
)
from offline.fitting.cross_validation import _fit_power_per_engine
from offline.fitting.end_to_end import predicted_per_sequence_j
from offline.measure.budget import CampaignRun
from offline.measure.campaign import provenance
from offline.measure.campaign_output import Campaign, committed_campaigns, write_campaign
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import load_cost_model_coefficients

H100 = "H100-SXM5-80GB"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen3-30B-A3B"


def gemm(m: int, n: int = 28672, k: int = 4096, latency_ms: float = 1.0) -> dict[str, object]:
    return {"m": m, "n": n, "k": k, "gemm_dtype": "bfloat16", "latency": latency_ms, "power": 500.0}


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
    run.rows["gemm_perf"] = [gemm(m) for m in (1, 16, 256, 1024, 4096, 16384)]
    run.rows["moe_perf"] = [
        {
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
    document = provenance(
        gpu=H100,
        gpu_name="NVIDIA H100 80GB HBM3",
        facts={"driver": "570.86.15", "power_limit_w": [700.0], "uuids": ["GPU-1"]},
        torch_version="2.13.0+cu128",
        cuda_version="12.8",
        budget_s=450.0,
        elapsed_s=400.0,
        power_source="nvml-field-power-instant",
        argv=["--out", "x"],
    )
    write_campaign(tmp_path / "2026-11-26-h100", run, document)
    (found,) = committed_campaigns(tmp_path)
    return found


def test_kernel_rows_are_priced_by_the_roofline(tmp_path: Path) -> None:
    coefficients = load_cost_model_coefficients()
    rows = kernel_power_rows([campaign(tmp_path)], coefficients, load_gpu_catalog())
    assert rows is not None and len(rows.measured_w) == 7
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
    assert rows.time_s[6] == pytest.approx(2e-4) and rows.measured_w[6] == 450.0  # the MoE row


def test_end_to_end_rows_are_the_hf_transformers_engine(tmp_path: Path) -> None:
    found = campaign(tmp_path)
    coefficients = load_cost_model_coefficients()
    models, gpus = load_model_catalog(), load_gpu_catalog()
    rows = campaign_end_to_end_rows([found], models, gpus, coefficients)
    assert len(rows) == 12 and {r.engine for r in rows} == {"hf-transformers"}
    first = rows[0]  # Llama, batch 1, prompt 512: decode 0.63 x 17/16 s over 63 steps
    assert first.measured_tpot_s == pytest.approx(0.63 * 17 / 16 / 63)
    assert first.measured_prefill_s == pytest.approx(0.05)
    assert first.measured_per_sequence_j == pytest.approx(400.0 * (0.05 + 0.63 * 17 / 16))
    assert (first.gpu_id, first.decode_steps, first.family) == (H100, 63, "llama")
    moe = next(r for r in rows if r.model_id == QWEN)
    assert moe.prefill.compute_s.sum() < rows[0].prefill.compute_s.sum()  # 12 of 48 layers
    assert campaign_versions([found]) == ["2.13.0+cu128"]
    (recorded,) = campaign_provenance([found])
    assert recorded["gpu"] == H100 and recorded["rows"]["end_to_end"] == 36


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
