"""The verbose breakdown adds up to the quote (service/pricing/breakdown.py): per phase its
rows' times sum to the quoted phase time and their energies to the quoted phase energy, the
host-overhead row carrying what the kernels do not (its decode energy worked out here from
the engine's host times and powers), and a correction row carrying the learned regressor's
move of the energy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.catalog.engines import load_engine_coefficients
from service.pricing.estimator import Estimator
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

STATIC_V0 = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "hardware": {"gpu": "A100-SXM4-40GB", "count": 2},
    "workload": {"batch_size": 8, "prompt_tokens": 300, "output_tokens": 40},
    "serving": {"engine": "vllm", "engine_version": "0.5.4"},
}
CONTINUOUS = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "hardware": {"gpu": "H100-SXM5-80GB", "count": 1},
    "workload": {"batch_size": 1, "prompt_tokens": 690, "output_tokens": 200},
    "serving": {"engine": "vllm", "engine_version": "0.11.1", "concurrent_sequences": 64},
}


def quote(estimator: Estimator, body: dict[str, Any]) -> dict[str, Any]:
    priced = estimator.estimate(EstimateRequest.model_validate(body), verbose=True)
    document: dict[str, Any] = json.loads(priced.document.text())
    return document


def phase_sums(document: dict[str, Any], phase: str) -> tuple[float, float]:
    rows = [r for r in document["breakdown"]["kernels"] if r["phase"] == phase]
    return sum(r["time_s"] for r in rows), sum(r["gpu_j"] for r in rows)


@pytest.fixture(scope="module")
def analytical() -> Estimator:
    return Estimator.from_catalogues(regressor=None)


@pytest.mark.parametrize("body", [STATIC_V0, CONTINUOUS], ids=["static", "continuous"])
def test_rows_add_up_to_the_quote(analytical: Estimator, body: dict[str, Any]) -> None:
    document = quote(analytical, body)
    energy, latency = document["energy"], document["latency"]
    for phase in ("prefill", "decode"):
        time_s, gpu_j = phase_sums(document, phase)
        assert time_s == pytest.approx(latency[f"{phase}_s"], rel=1e-9)
        assert gpu_j == pytest.approx(energy[f"{phase}_gpu_j"], rel=1e-9)
    kinds = [r["kind"] for r in document["breakdown"]["kernels"]]
    assert kinds.count("host_overhead") == 2  # one per phase
    assert "correction" not in kinds  # the analytical quote is the kernels plus host time


def test_decode_host_row_is_the_engine_host_time_at_its_powers(analytical: Estimator) -> None:
    """vLLM 0.5.4 (profile vllm-v0), a static batch of 8 on 2 A100s, 39 decode steps: per step
    the fixed time, 8 x the per-sequence time and 1 x the per-worker time; the GPUs draw the
    host-overhead power over the fixed part, the per-sequence power over the per-sequence
    part and idle power while the driver feeds the second worker."""
    c = load_engine_coefficients()["vllm-v0"]
    gpu = analytical.gpus.get("A100-SXM4-40GB").spec
    steps, batch, gpus = 39, 8, 2
    fixed_s = steps * c.roofline.decode_step_overhead_s
    sequences_s = steps * batch * c.roofline.decode_overhead_per_sequence_s
    wait_s = steps * (gpus - 1) * c.roofline.decode_overhead_per_worker_s
    dynamic_w = gpu.tdp_w - gpu.idle_w
    expected_j = gpus * (
        (gpu.idle_w + dynamic_w * c.power.host_overhead) * fixed_s
        + (gpu.idle_w + dynamic_w * c.power.host_per_sequence) * sequences_s
        + gpu.idle_w * wait_s
    )
    (row,) = [
        r
        for r in quote(analytical, STATIC_V0)["breakdown"]["kernels"]
        if r["phase"] == "decode" and r["kind"] == "host_overhead"
    ]
    assert row["gpu_j"] == pytest.approx(expected_j, rel=1e-6)
    assert row["time_s"] == pytest.approx(fixed_s + sequences_s + wait_s, rel=1e-6)


def test_the_regressor_correction_has_its_own_row() -> None:
    learned = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    document = quote(learned, STATIC_V0)
    analytical_rows = quote(Estimator.from_catalogues(regressor=None), STATIC_V0)
    for phase in ("prefill", "decode"):
        _, gpu_j = phase_sums(document, phase)
        assert gpu_j == pytest.approx(document["energy"][f"{phase}_gpu_j"], rel=1e-9)
        (row,) = [
            r
            for r in document["breakdown"]["kernels"]
            if r["phase"] == phase and r["kind"] == "correction"
        ]
        moved = document["energy"][f"{phase}_gpu_j"] - analytical_rows["energy"][f"{phase}_gpu_j"]
        assert row["gpu_j"] == pytest.approx(moved, rel=1e-9)
