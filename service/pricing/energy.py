"""GPU energy of a priced request when the learned regressor does not answer it (the roofline's),
and a calibration's correction of it and of the latency."""

from __future__ import annotations

from dataclasses import replace

from service.core.coefficients import CostModelCoefficients
from service.pricing.calibration.physics import Factors
from service.pricing.document import Latency
from service.pricing.regressor.runtime import EnergyPrediction


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


def scaled_latency(latency: Latency, factors: Factors) -> Latency:
    """`latency` with prefill and decode times moved by the calibration's `factors` (time per
    output token with decode, the total as their sum; their intervals follow in the document)."""
    prefill_s = latency.prefill_s * factors.prefill
    decode_s = latency.decode_s * factors.decode
    return replace(
        latency,
        prefill_s=prefill_s,
        decode_s=decode_s,
        time_per_output_token_s=latency.time_per_output_token_s * factors.decode,
        total_s=prefill_s + decode_s,
    )
