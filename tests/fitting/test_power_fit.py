"""Power coefficients: shared kernel power; per serving engine, the power of the fixed host time
and of the host time per sequence."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from offline.fitting.cross_validation import _fit_power_per_engine
from offline.fitting.end_to_end import EndToEndRow, Overheads, PhaseArrays, predicted_per_sequence_j
from service.catalog.engines import (
    HOST_OVERHEAD_POWER,
    HOST_PER_SEQUENCE_POWER,
    engine_coefficients_from_document,
)

OVERHEADS: dict[str, Overheads] = {
    "vllm-v0": (0.02, 0.01, 2e-4, 2e-5, 8e-3),
    "vllm-v1": (0.02, 2e-3, 4e-5, 6e-6, 0.0),
}


def _phase(rng: np.random.Generator, kernels: int) -> PhaseArrays:
    compute = rng.uniform(0.0, 1e-3, kernels)
    memory = rng.uniform(0.0, 1e-3, kernels)
    network = rng.uniform(0.0, 2e-4, kernels)
    time = np.maximum(np.maximum(compute, memory), network) + 1e-6
    return PhaseArrays(np.ones(kernels), time, compute, memory, network)


def _row(rng: np.random.Generator, engine: str) -> EndToEndRow:
    return EndToEndRow(
        source="synthetic",
        engine=engine,
        model_id="m",
        family="f",
        gpu_id="H100-SXM5-80GB",
        batch_size=int(rng.integers(1, 512)),
        decode_steps=int(rng.integers(50, 500)),
        gpu_count=1,
        group_gpus=1,
        idle_w=80.0,
        dynamic_w=620.0,
        prefill=_phase(rng, 6),
        decode=_phase(rng, 6),
        launch_s=6e-6,
        measured_tpot_s=0.0,
        measured_prefill_s=None,
        measured_per_sequence_j=None,
        fits_memory=True,
    )


def test_fit_recovers_shared_kernel_power_and_each_engines_overhead_powers() -> None:
    rng = np.random.default_rng(0)
    truth = {"vllm-v0": (0.2, 0.4), "vllm-v1": (0.1, 0.95)}
    kernel_power = np.array([0.9, 0.6, 0.5])
    rows = []
    for engine in truth:
        made = [_row(rng, engine) for _ in range(40)]
        power = np.append(kernel_power, truth[engine])
        energy = predicted_per_sequence_j(made, OVERHEADS[engine], power)
        rows += [
            replace(r, measured_per_sequence_j=float(e)) for r, e in zip(made, energy, strict=True)
        ]
    fitted, overhead_power = _fit_power_per_engine(rows, OVERHEADS)
    np.testing.assert_allclose(fitted, kernel_power, atol=1e-3)
    for engine, powers in truth.items():
        assert overhead_power[engine] == pytest.approx(powers, abs=1e-3)


def test_an_engine_without_energy_rows_takes_the_mean_overhead_powers() -> None:
    rng = np.random.default_rng(1)
    made = [_row(rng, "vllm-v0") for _ in range(30)] + [_row(rng, "vllm-v1") for _ in range(30)]
    rows = []
    for r in made:
        hosts = [0.2, 0.4] if r.engine == "vllm-v0" else [0.6, 1.0]
        power = np.array([0.9, 0.6, 0.5, *hosts])
        (energy,) = predicted_per_sequence_j([r], OVERHEADS[r.engine], power)
        rows.append(replace(r, measured_per_sequence_j=float(energy)))
    overheads = {**OVERHEADS, "harness": (0.02, 0.0, 1e-4, 1e-5, 0.0)}
    _, overhead_power = _fit_power_per_engine(rows, overheads)
    assert overhead_power["harness"] == pytest.approx(((0.2 + 0.6) / 2, (0.4 + 1.0) / 2), abs=1e-3)


def test_each_served_engine_draws_its_own_overhead_power() -> None:
    document = {
        "version": "roofline test",
        "roofline": {
            "tensor_efficiency": 0.7,
            "cuda_core_efficiency": 0.5,
            "special_function_efficiency": 0.4,
            "memory_efficiency": 0.7,
            "elementwise_memory_efficiency": 0.4,
            "kernel_launch_s": 3e-6,
            "network_efficiency": 0.5,
            "collective_step_latency_s": 3e-6,
            "prefill_overhead_s": 0.02,
            "decode_step_overhead_s": 0.0,
            "decode_overhead_per_sequence_s": 4e-5,
            "decode_kernel_launch_s": 6e-6,
            "gemm_tile_m": 64,
        },
        "power": {
            "compute": 0.9,
            "memory": 0.6,
            "network": 0.5,
            "host_overhead": 0.7,
            "host_per_sequence": 0.8,
        },
        "energy_interval": {
            "low_ratio": 0.8,
            "high_ratio": 1.2,
            "lower_quantile": 0.1,
            "upper_quantile": 0.9,
        },
        "engines": {
            "vllm-v0": {
                "decode_step_overhead_s": 0.017,
                HOST_OVERHEAD_POWER: 0.1,
                HOST_PER_SEQUENCE_POWER: 0.3,
            },
            "vllm-v1": {"decode_overhead_per_sequence_s": 4e-5, HOST_OVERHEAD_POWER: 0.7},
            "older": {"decode_step_overhead_s": 0.03},
        },
    }
    engines = engine_coefficients_from_document(document)
    assert engines["vllm-v0"].power.host_overhead == 0.1
    assert engines["vllm-v0"].power.host_per_sequence == 0.3
    assert engines["vllm-v0"].roofline.decode_step_overhead_s == 0.017
    assert engines["vllm-v1"].power.host_overhead == 0.7
    assert engines["vllm-v1"].power.host_per_sequence == 0.8  # the shared one
    assert engines["older"].power.host_overhead == 0.7  # no figure of its own: the shared one
    assert engines["vllm-v0"].power.compute == engines["vllm-v1"].power.compute == 0.9
