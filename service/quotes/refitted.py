"""A GPU's refitted coefficients as the calibration API shows them: each figure the refit moves,
at the catalogue's prior and as fitted (the multipliers of service.pricing.calibration.physics
applied to the GPU's spec and its engine's coefficients)."""

from __future__ import annotations

import math
from typing import Any

from service.core.coefficients import CostModelCoefficients
from service.core.hardware import GpuSpec
from service.pricing.calibration import GpuFit
from service.pricing.estimator import Estimator
from service.schemas.calibrations import GpuFitOut


def physical_figures(
    spec: GpuSpec, coefficients: CostModelCoefficients, multipliers: dict[str, float]
) -> dict[str, float]:
    """The refitted figures of `spec` under `coefficients`, moved by `multipliers` (all 1: the
    prior). Efficiencies are achievable fractions of the published peaks [-], powers [W], times
    [s]; `compute_w`/`memory_w` are the dynamic power at full use of that unit, `host_overhead_w`
    what the GPU draws during host-side time."""
    roofline, power = coefficients.roofline, coefficients.power
    dynamic_w = spec.tdp_w - spec.idle_w
    idle_w = spec.idle_w * multipliers["idle_power"]
    return {
        "tensor_efficiency": roofline.tensor_efficiency / multipliers["compute_time"],
        "cuda_core_efficiency": roofline.cuda_core_efficiency / multipliers["compute_time"],
        "memory_efficiency": roofline.memory_efficiency / multipliers["memory_time"],
        "elementwise_memory_efficiency": roofline.elementwise_memory_efficiency
        / multipliers["memory_time"],
        "network_efficiency": roofline.network_efficiency / multipliers["network_time"],
        "kernel_launch_s": roofline.kernel_launch_s * multipliers["kernel_rest_time"],
        "decode_kernel_launch_s": roofline.decode_kernel_launch_s * multipliers["kernel_rest_time"],
        "prefill_overhead_s": roofline.prefill_overhead_s * multipliers["host_time"],
        "decode_step_overhead_s": roofline.decode_step_overhead_s * multipliers["host_time"],
        "decode_overhead_per_sequence_s": roofline.decode_overhead_per_sequence_s
        * multipliers["host_time"],
        "idle_w": idle_w,
        "compute_w": dynamic_w * power.compute * multipliers["compute_power"],
        "memory_w": dynamic_w * power.memory * multipliers["memory_power"],
        "host_overhead_w": idle_w + dynamic_w * power.host_overhead * multipliers["host_power"],
    }


def refitted_coefficients(fit: GpuFit, estimator: Estimator) -> dict[str, dict[str, float]]:
    """`fit`'s figures at the prior and as fitted (empty for a GPU no longer catalogued)."""
    try:
        spec = estimator.gpus.get(fit.gpu).spec
    except LookupError:
        return {}
    coefficients = estimator.engine_coefficients.get(fit.engine, estimator.coefficients)
    prior = physical_figures(spec, coefficients, {name: 1.0 for name in fit.multipliers})
    return {"prior": prior, "fitted": physical_figures(spec, coefficients, fit.multipliers)}


def fit_out(fit: GpuFit, figures: dict[str, Any]) -> GpuFitOut:
    held = fit.held_out
    return GpuFitOut(
        gpu=fit.gpu,
        engine=fit.engine,
        n=fit.n,
        n_total_s=fit.n_latency,
        active=fit.active,
        reason=fit.reason,
        holdout_mape_before=held.energy_before,
        holdout_mape_after=held.energy_after,
        holdout_latency_mape_before=held.latency_before,
        holdout_latency_mape_after=held.latency_after,
        multipliers={k: v for k, v in fit.multipliers.items() if math.isfinite(v)},
        prior=figures.get("prior", {}),
        fitted=figures.get("fitted", {}),
    )
