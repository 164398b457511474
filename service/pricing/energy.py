"""GPU energy of a priced request when the learned regressor does not answer it (the roofline's),
a calibration's correction of it, and the learned regressor's correction of the latency (its
time head) on the engines it was trained on."""

from __future__ import annotations

from dataclasses import replace

from service.core.coefficients import CostModelCoefficients
from service.pricing.regressor.runtime import EnergyPrediction
from service.pricing.resolve import ResolvedRequest


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


def learned_decode_factor(
    energy: EnergyPrediction, resolved: ResolvedRequest, engines: frozenset[str]
) -> float:
    """The factor on `resolved`'s time per output token (and decode time with it) of the
    regressor's time head: `energy.tpot_factor` where the request's engine is one the time
    head was trained on (`engines`: its profile, priced with its own measured version); 1.0
    elsewhere (on an engine held out of training the correction raised the error). Either way
    a note in `resolved.notes` says which, when the regressor has a time head. Not called
    where a calibration's refit moves the times (fitted to the analytical ones, it replaces
    this correction)."""
    if not engines or energy.tpot_factor == 1.0:  # no time head, or the roofline answered
        return 1.0
    if resolved.engine in engines and resolved.engine_evidence == resolved.engine:
        resolved.notes.append(
            "time per output token, decode and total time corrected by the learned "
            f"regressor's time head, trained on {resolved.engine} measurements"
        )
        return energy.tpot_factor
    trained = ", ".join(sorted(engines))
    resolved.notes.append(
        f"latency is the analytical model's: the learned regressor corrects it only for the "
        f"engines it was trained on ({trained}), not {resolved.engine_evidence}"
    )
    return 1.0
