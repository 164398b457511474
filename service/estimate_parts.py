"""Pieces of a priced response shared by the one-request and the batch paths: what the response
needs of an analytical estimate, the roofline's energy, calibration scaling, breakdown rows, the
core's errors as 422s, and the carbon parts the requests of one context share."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import TypeAdapter

from service.carbon_accounting import CarbonInputs, carbon_factors_out
from service.core.carbon import HeldRates, held_rates
from service.core.coefficients import CostModelCoefficients
from service.core.errors import CostModelError, InsufficientMemory, InvalidArchitecture
from service.core.results import KernelCost, RequestEstimate
from service.db.quote_document import CarbonFactorSet
from service.errors import FieldError, InvalidRequest
from service.regressor.runtime import EnergyPrediction
from service.schemas.estimate_response import CarbonFactorOut, KernelRowOut

_FACTOR_ROWS: TypeAdapter[dict[str, CarbonFactorOut]] = TypeAdapter(dict[str, CarbonFactorOut])


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

    @classmethod
    def of(cls, result: RequestEstimate) -> Latency:
        return cls(
            result.prefill.time_s,
            result.decode.time_s,
            result.time_per_output_token_s,
            result.total_s,
            result.gpu_count,
            result.batch_size,
            result.warnings,
        )


def roofline_energy(
    prefill_gpu_j: float, decode_gpu_j: float, coefficients: CostModelCoefficients
) -> EnergyPrediction:
    """The analytical GPU energy [J] with the fitted interval."""
    interval = coefficients.energy_interval
    gpu_j = prefill_gpu_j + decode_gpu_j
    return EnergyPrediction(
        gpu_j=gpu_j,
        gpu_j_low=gpu_j * interval.low_ratio,
        gpu_j_high=gpu_j * interval.high_ratio,
        prefill_gpu_j=prefill_gpu_j,
        decode_gpu_j=decode_gpu_j,
        lower_quantile=interval.lower_quantile,
        upper_quantile=interval.upper_quantile,
    )


def scaled_energy(energy: EnergyPrediction, factor: float) -> EnergyPrediction:
    """`energy` with the GPU energy, its bounds and its phase split multiplied by `factor`."""
    return replace(
        energy,
        gpu_j=energy.gpu_j * factor,
        gpu_j_low=energy.gpu_j_low * factor,
        gpu_j_high=energy.gpu_j_high * factor,
        prefill_gpu_j=energy.prefill_gpu_j * factor,
        decode_gpu_j=energy.decode_gpu_j * factor,
    )


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


def invalid_request(error: CostModelError, *, custom: bool) -> InvalidRequest:
    """The core's error as a 422 naming the request field at fault."""
    loc = error.field or "body"
    if isinstance(error, InvalidArchitecture):
        loc = f"architecture.{loc}" if custom else "model"
    extra: dict[str, object] = {"error": type(error).__name__}
    if isinstance(error, InsufficientMemory):
        extra["required_gpu_count"] = error.required_gpu_count
    return InvalidRequest(error.message, errors=[FieldError(loc, error.message)], extra=extra)
