"""A priced request's response document, written once with orjson: its members, their names and
their order are the schema's (EstimateResponse and the models it nests), this module supplies
their values by name, and the text is the one pydantic writes for the schema
(tests/estimator/test_response_document.py). The carbon factors are serialised once per request
context; `quote_id` and `created_at` are written in front when the quote is stored
(service/db/quote_document.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter

from service.core.carbon import HeldRates, carbon_figures, held_rates
from service.core.results import KernelCost, RequestEstimate
from service.core.uncertainty import Ranged
from service.db.quote_document import CarbonFactorSet, QuoteDocument
from service.pricing.breakdown import beyond_kernel_rows
from service.pricing.carbon_accounting import CarbonInputs, carbon_factors_out, carbon_members
from service.pricing.evidence import Evidence
from service.pricing.regressor.runtime import EnergyPrediction
from service.pricing.resolve import ResolvedRequest
from service.schemas.estimate_response import (
    BreakdownOut,
    CarbonFactorOut,
    CarbonOut,
    EnergyOut,
    EstimateResponse,
    KernelRowOut,
    LatencyOut,
)

_FACTOR_ROWS: TypeAdapter[dict[str, CarbonFactorOut]] = TypeAdapter(dict[str, CarbonFactorOut])
_STORED_FIRST = ("quote_id", "created_at")  # written in front when the quote is stored
_DOCUMENT_FIELDS = tuple(EstimateResponse.model_fields)[len(_STORED_FIRST) :]
_ENERGY_FIELDS = tuple(EnergyOut.model_fields)
_LATENCY_FIELDS = tuple(LatencyOut.model_fields)
_CARBON_FIELDS = tuple(CarbonOut.model_fields)
assert tuple(EstimateResponse.model_fields)[: len(_STORED_FIRST)] == _STORED_FIRST


@dataclass(frozen=True, slots=True)
class Latency:
    """What a response needs of an analytical estimate besides energy (times in s)."""

    prefill_s: float
    decode_s: float
    time_per_output_token_s: float
    total_s: float
    gpu_count: int
    batch_size: int
    warnings: tuple[str, ...]
    held_s: float | None = None  # the GPUs' time held, if not total_s (disaggregated)


@dataclass(frozen=True, slots=True)
class Calibrated:
    """The calibration a quote was priced with: its id (None: none applied) and factor."""

    calibration_id: str | None
    factor: float


def quote_document(
    model_version: str,
    resolved: ResolvedRequest,
    latency: Latency,
    energy: EnergyPrediction,
    breakdown: RequestEstimate | None,
    calibrated: Calibrated,
    priced_at: datetime,
    evidence: Evidence,
) -> tuple[QuoteDocument, float]:
    """The response document of one priced request (quote_id None until it is stored), and
    its CO2e [g]. Every interval, energy and latency, is the one of `evidence`'s level."""
    ratios = evidence.ratios
    energy_low, energy_high = ratios["energy"]
    gpu_j_low, gpu_j_high = energy.gpu_j * energy_low, energy.gpu_j * energy_high
    gpu_j = Ranged.from_bounds(energy.gpu_j, gpu_j_low, gpu_j_high)
    factor_set, rates = carbon_priced_parts(resolved.carbon)
    held_s = latency.total_s if latency.held_s is None else latency.held_s
    carbon = carbon_figures(gpu_j, held_s, resolved.carbon.factors, rates)
    lower, upper = evidence.lower_quantile, evidence.upper_quantile
    # Every member written in the schema's order (in_schema_order checks it).
    energy_members = {
        "gpu_j": energy.gpu_j,
        "gpu_j_low": gpu_j_low,
        "gpu_j_high": gpu_j_high,
        "per_sequence_gpu_j": energy.gpu_j / latency.batch_size,
        "server_overhead_j": carbon.server_overhead_j,
        "facility_j": carbon.facility_j[0],
        "prefill_gpu_j": energy.prefill_gpu_j,
        "decode_gpu_j": energy.decode_gpu_j,
        "interval_lower_quantile": lower,
        "interval_upper_quantile": upper,
        "calibration_factor": calibrated.factor,
    }
    prefill_s, decode_s = latency.prefill_s, latency.decode_s
    tpot_s, total_s = latency.time_per_output_token_s, latency.total_s
    prefill_low, prefill_high = ratios["prefill"]
    tpot_low, tpot_high = ratios["tpot"]  # decode time's too
    total_low, total_high = ratios["total"]
    times = {
        "prefill_s": prefill_s,
        "prefill_s_low": prefill_s * prefill_low,
        "prefill_s_high": prefill_s * prefill_high,
        "decode_s": decode_s,
        "decode_s_low": decode_s * tpot_low,
        "decode_s_high": decode_s * tpot_high,
        "time_per_output_token_s": tpot_s,
        "time_per_output_token_s_low": tpot_s * tpot_low,
        "time_per_output_token_s_high": tpot_s * tpot_high,
        "total_s": total_s,
        "total_s_low": total_s * total_low,
        "total_s_high": total_s * total_high,
        "interval_lower_quantile": lower,
        "interval_upper_quantile": upper,
    }
    members = in_schema_order(
        _DOCUMENT_FIELDS,
        {
            "model_version": model_version,
            "calibration_id": calibrated.calibration_id,
            "model": resolved.model_id,
            "gpu": resolved.gpu.id,
            "gpu_count": latency.gpu_count,
            "energy": in_schema_order(_ENERGY_FIELDS, energy_members),
            "latency": in_schema_order(_LATENCY_FIELDS, times),
            "carbon": in_schema_order(
                _CARBON_FIELDS, carbon_members(resolved.carbon, carbon, rates)
            ),
            "breakdown": None
            if breakdown is None
            else _breakdown(resolved, breakdown, latency, energy),
            "validation": evidence.validation_json,
            "warnings": [*latency.warnings, *resolved.notes],
        },
    )
    text = orjson.dumps(members, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    return QuoteDocument.written(text, priced_at, factor_set), carbon.total_g[0]


def in_schema_order(fields: tuple[str, ...], values: dict[str, Any]) -> dict[str, Any]:
    """`values` as the schema's `fields`, in their order; a field without a value, or a value
    the schema has no field for, is a bug (KeyError, ValueError)."""
    if tuple(values) == fields:  # written in the schema's order already
        return values
    if len(values) != len(fields):
        unknown = sorted(set(values) - set(fields))
        raise ValueError(f"values without a field in the schema: {unknown}")
    return {name: values[name] for name in fields}


def carbon_priced_parts(inputs: CarbonInputs) -> tuple[CarbonFactorSet, HeldRates]:
    """What every quote priced with `inputs` shares: the carbon block's `factors` (every factor
    with its bounds, unit and source) as the JSON text the response carries, with the id it is
    stored under, and the held hardware's rates. Made once per request context (kept on
    `inputs`, which the estimator's context memory shares)."""
    parts = inputs.priced_parts
    if parts is None:
        factors_json = _FACTOR_ROWS.dump_json(carbon_factors_out(inputs)).decode()
        parts = inputs.priced_parts = (CarbonFactorSet.of(factors_json), held_rates(inputs.factors))
    return parts


def _breakdown(
    resolved: ResolvedRequest,
    estimate: RequestEstimate,
    latency: Latency,
    energy: EnergyPrediction,
) -> dict[str, Any]:
    """The per-kernel rows and the rows beyond them (host time, the regressor's correction):
    per phase they add up to the quoted time and energy."""
    kernels = estimate.prefill.kernels + estimate.decode.kernels
    beyond = beyond_kernel_rows(
        estimate,
        (latency.prefill_s, latency.decode_s),
        (energy.prefill_gpu_j, energy.decode_gpu_j),
    )
    memory = estimate.memory
    return BreakdownOut(
        kernels=[kernel_row(kernel) for kernel in kernels] + beyond,
        defaulted_inputs=resolved.defaulted,
        weight_bytes_per_gpu=memory.weight_bytes_per_gpu,
        kv_cache_bytes_per_gpu=memory.kv_cache_bytes_per_gpu,
        memory_capacity_bytes_per_gpu=memory.capacity_bytes_per_gpu,
    ).model_dump(mode="json")


def kernel_row(kernel: KernelCost) -> KernelRowOut:
    return KernelRowOut(
        phase=kernel.phase.value,
        kernel=kernel.name,
        kind=kernel.kind,
        executions=int(kernel.executions),
        tensor_flops=float(kernel.tensor_flops),
        cuda_core_ops=float(kernel.cuda_core_ops),
        special_function_ops=float(kernel.special_function_ops),
        memory_bytes=float(kernel.memory_bytes),
        network_bytes=float(kernel.network_bytes),
        bound=kernel.bound.value,
        compute_precision=kernel.compute_precision,
        time_s=float(kernel.time_s),
        gpu_j=float(kernel.gpu_j),
        arithmetic_intensity_flops_per_byte=float(kernel.arithmetic_intensity_flops_per_byte),
        ridge_point_flops_per_byte=float(kernel.ridge_point_flops_per_byte),
    )
