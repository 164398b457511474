"""The body answered by POST /v1/estimate."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from service.schemas.common import example
from service.schemas.validation import VALIDATION_EXAMPLE, ValidationOut

ENERGY_EXAMPLE = {
    "gpu_j": 812.4,
    "gpu_j_low": 700.0,
    "gpu_j_high": 950.0,
    "per_sequence_gpu_j": 101.6,
    "server_overhead_j": 922.5,
    "facility_j": 2706.4,
    "prefill_gpu_j": 40.2,
    "decode_gpu_j": 772.2,
    "interval_lower_quantile": 0.1,
    "interval_upper_quantile": 0.9,
    "calibration_factor": 1.0,
}

LATENCY_EXAMPLE = {
    "prefill_s": 0.061,
    "prefill_s_low": 0.040,
    "prefill_s_high": 0.110,
    "decode_s": 3.629,
    "decode_s_low": 3.1,
    "decode_s_high": 4.6,
    "time_per_output_token_s": 0.0142,
    "time_per_output_token_s_low": 0.0121,
    "time_per_output_token_s_high": 0.0180,
    "total_s": 3.69,
    "total_s_low": 3.2,
    "total_s_high": 4.7,
    "interval_lower_quantile": 0.1,
    "interval_upper_quantile": 0.9,
}

PUE_FACTOR_EXAMPLE = {
    "value": 1.56,
    "low": 1.25,
    "high": 1.8,
    "unit": "-",
    "defaulted": True,
    "source": "fleet PUE of operator 'default': Uptime Institute Global Data Center Survey 2024",
}

CARBON_EXAMPLE = {
    "operational_g": 0.170,
    "embodied_g": 0.041,
    "total_g": 0.211,
    "total_g_low": 0.130,
    "total_g_high": 0.429,
    "carbon_intensity_g_per_kwh": 226.5,
    "pue": 1.56,
    "region": "US-CA",
    "carbon_intensity_source": "region US-CA (2022, direct): US EPA eGRID2022 ...",
    "operational_g_low": 0.105,
    "operational_g_high": 0.324,
    "embodied_g_low": 0.025,
    "embodied_g_high": 0.105,
    "embodied_gpu_g": 0.008,
    "embodied_server_g": 0.033,
    "embodied_method": "product-carbon-footprint",
    "server_overhead_w": 250.0,
    "lifetime_years": 5.0,
    "utilisation": 1.0,
    "water_l": 0.0032,
    "water_l_low": 0.0012,
    "water_l_high": 0.0075,
    "factors": {"pue": PUE_FACTOR_EXAMPLE},
}


class EnergyOut(BaseModel):
    """GPU energy of the whole request [J]; `_low`/`_high` bound it by the held-out
    `interval_lower_quantile`..`interval_upper_quantile` of measured/predicted ratios at the
    quote's evidence level (`validation`)."""

    model_config = example(ENERGY_EXAMPLE)

    gpu_j: float = Field(description="Energy of all GPUs for all sequences [J] (what NVML reads).")
    gpu_j_low: float
    gpu_j_high: float
    per_sequence_gpu_j: float = Field(description="gpu_j / batch_size [J].")
    server_overhead_j: float = Field(
        default=0.0,
        description="Non-GPU server energy (CPUs, memory, NICs, fans) charged to the request: "
        "the held GPUs' share of the server's non-GPU power x total_s [J].",
    )
    facility_j: float = Field(description="(gpu_j + server_overhead_j) x PUE [J].")
    prefill_gpu_j: float
    decode_gpu_j: float
    interval_lower_quantile: float
    interval_upper_quantile: float
    calibration_factor: float = Field(
        default=1.0,
        description="Factor the calibration `calibration_id` multiplied the GPU energy, its "
        "bounds and its phase split by (1 when uncalibrated); gpu_j / calibration_factor is "
        "the model's own prediction.",
    )


class LatencyOut(BaseModel):
    """Times of the request [s]; each `_low`/`_high` bounds it by the
    `interval_lower_quantile`..`interval_upper_quantile` of measured/predicted at the quote's
    evidence level (`validation`); decode_s takes time_per_output_token_s's ratios. Null on
    quotes stored before latency intervals were stated."""

    model_config = example(LATENCY_EXAMPLE)

    prefill_s: float
    prefill_s_low: float | None = None
    prefill_s_high: float | None = None
    decode_s: float
    decode_s_low: float | None = None
    decode_s_high: float | None = None
    time_per_output_token_s: float = Field(description="Mean decode step time [s].")
    time_per_output_token_s_low: float | None = None
    time_per_output_token_s_high: float | None = None
    total_s: float = Field(description="prefill_s + decode_s [s].")
    total_s_low: float | None = None
    total_s_high: float | None = None
    interval_lower_quantile: float | None = None
    interval_upper_quantile: float | None = None


class CarbonFactorOut(BaseModel):
    """One factor the quote was priced with: value, its 10th-90th percentile band, unit, source,
    and whether it was a default (True) or given in the request (False)."""

    model_config = example(PUE_FACTOR_EXAMPLE)

    value: float
    low: float
    high: float
    unit: str
    defaulted: bool
    source: str


class CarbonOut(BaseModel):
    """CO2e [g] and water [L] of the whole request, with every factor used and its source.

    `total_g = operational_g + embodied_g`; `operational_g` = facility kWh x grid intensity;
    `embodied_g` = GPUs' and server share's manufacturing emissions x total_s /
    (lifetime x utilisation). `_low`/`_high`: products of factors combine their bands in log
    space in quadrature, sums add them (README, "Carbon accounting boundary")."""

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
    operational_g_low: float = 0.0
    operational_g_high: float = 0.0
    embodied_g_low: float = 0.0
    embodied_g_high: float = 0.0
    embodied_gpu_g: float = Field(default=0.0, description="GPUs' share of embodied_g [g].")
    embodied_server_g: float = Field(
        default=0.0, description="Server non-GPU parts' share of embodied_g [g]."
    )
    embodied_method: str = Field(
        default="", description="How the GPU's embodied figure was made (gpus.json method)."
    )
    server_overhead_w: float = Field(
        default=0.0, description="Non-GPU server power charged to the request [W]."
    )
    lifetime_years: float = 0.0
    utilisation: float = 0.0
    water_l: float = Field(default=0.0, description="On-site + off-site water consumed [L].")
    water_l_low: float = 0.0
    water_l_high: float = 0.0
    factors: dict[str, CarbonFactorOut] = Field(
        default_factory=dict, description="Every factor used, by name, with its source."
    )


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
            "model_version": "energy-gnn 2026.11.26+roofline 2026.11.7",
            "calibration_id": None,
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "H100-SXM5-80GB",
            "gpu_count": 2,
            "energy": ENERGY_EXAMPLE,
            "latency": LATENCY_EXAMPLE,
            "carbon": CARBON_EXAMPLE,
            "breakdown": None,
            "validation": VALIDATION_EXAMPLE,
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
    # After breakdown: stored rows mark the end of `carbon` by the `breakdown` that follows it
    # (migration 0005 puts the carbon factors back there on downgrade).
    validation: ValidationOut | None = Field(
        default=None, description="Null on quotes stored before it was stated."
    )
    warnings: list[str]
