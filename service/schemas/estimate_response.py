"""The body answered by POST /v1/estimate."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from service.schemas.common import example

ENERGY_EXAMPLE = {
    "gpu_j": 812.4,
    "gpu_j_low": 700.0,
    "gpu_j_high": 950.0,
    "per_sequence_gpu_j": 101.6,
    "facility_j": 974.9,
    "prefill_gpu_j": 40.2,
    "decode_gpu_j": 772.2,
    "interval_lower_quantile": 0.1,
    "interval_upper_quantile": 0.9,
}

LATENCY_EXAMPLE = {
    "prefill_s": 0.061,
    "decode_s": 3.629,
    "time_per_output_token_s": 0.0142,
    "total_s": 3.69,
}

CARBON_EXAMPLE = {
    "operational_g": 0.108,
    "embodied_g": 0.021,
    "total_g": 0.129,
    "total_g_low": 0.110,
    "total_g_high": 0.150,
    "carbon_intensity_g_per_kwh": 400.0,
    "pue": 1.2,
    "region": "US-CA",
    "carbon_intensity_source": "region US-CA (2022)",
}


class EnergyOut(BaseModel):
    """GPU energy of the whole request [J]; `_low`/`_high` bound it by the held-out
    `interval_lower_quantile`..`interval_upper_quantile` of measured/predicted ratios."""

    model_config = example(ENERGY_EXAMPLE)

    gpu_j: float = Field(description="Energy of all GPUs for all sequences [J] (what NVML reads).")
    gpu_j_low: float
    gpu_j_high: float
    per_sequence_gpu_j: float = Field(description="gpu_j / batch_size [J].")
    facility_j: float = Field(description="gpu_j x PUE [J] (server overhead not yet modelled).")
    prefill_gpu_j: float
    decode_gpu_j: float
    interval_lower_quantile: float
    interval_upper_quantile: float


class LatencyOut(BaseModel):
    model_config = example(LATENCY_EXAMPLE)

    prefill_s: float
    decode_s: float
    time_per_output_token_s: float = Field(description="Mean decode step time [s].")
    total_s: float = Field(description="prefill_s + decode_s [s].")


class CarbonOut(BaseModel):
    model_config = example(CARBON_EXAMPLE)

    operational_g: float
    embodied_g: float
    total_g: float
    total_g_low: float
    total_g_high: float
    carbon_intensity_g_per_kwh: float
    pue: float
    region: str | None
    carbon_intensity_source: str


class KernelRowOut(BaseModel):
    """One kernel over a whole phase (all layers, steps and GPUs)."""

    model_config = example(
        {
            "phase": "decode",
            "kernel": "qkv_proj",
            "kind": "gemm",
            "executions": 8160,
            "tensor_flops": 1.6e12,
            "cuda_core_ops": 0.0,
            "special_function_ops": 0.0,
            "memory_bytes": 2.5e10,
            "network_bytes": 0.0,
            "bound": "memory",
            "compute_precision": "bf16",
            "time_s": 0.012,
            "gpu_j": 6.1,
            "arithmetic_intensity_flops_per_byte": 64.0,
            "ridge_point_flops_per_byte": 295.0,
        }
    )

    phase: str
    kernel: str
    kind: str
    executions: int
    tensor_flops: float
    cuda_core_ops: float
    special_function_ops: float
    memory_bytes: float
    network_bytes: float
    bound: str
    compute_precision: str
    time_s: float
    gpu_j: float
    arithmetic_intensity_flops_per_byte: float
    ridge_point_flops_per_byte: float


class BreakdownOut(BaseModel):
    model_config = example(
        {
            "kernels": [],
            "defaulted_inputs": {"precision.weights": "bf16", "serving.flash_attention": True},
            "weight_bytes_per_gpu": 8.0e9,
            "kv_cache_bytes_per_gpu": 1.1e8,
            "memory_capacity_bytes_per_gpu": 8.0e10,
        }
    )

    kernels: list[KernelRowOut]
    defaulted_inputs: dict[str, Any] = Field(
        description="Inputs the caller left out, with the value used for each."
    )
    weight_bytes_per_gpu: float
    kv_cache_bytes_per_gpu: float
    memory_capacity_bytes_per_gpu: float


class EstimateResponse(BaseModel):
    model_config = example(
        {
            "quote_id": "q_01JDQ8Z3V5Q4XJ8M2W7K9T0ABC",
            "created_at": "2026-11-22T10:00:00Z",
            "model_version": "roofline 2026.11.1",
            "calibration_id": None,
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "H100-SXM5-80GB",
            "gpu_count": 2,
            "energy": ENERGY_EXAMPLE,
            "latency": LATENCY_EXAMPLE,
            "carbon": CARBON_EXAMPLE,
            "breakdown": None,
            "warnings": [],
        }
    )

    quote_id: str | None = Field(description="Null when the quote could not be stored.")
    created_at: datetime
    model_version: str = Field(description="Which estimator produced the figures.")
    calibration_id: str | None
    model: str
    gpu: str
    gpu_count: int
    energy: EnergyOut
    latency: LatencyOut
    carbon: CarbonOut
    breakdown: BreakdownOut | None = None
    warnings: list[str]
