"""The maximum a posteriori refit of one GPU's (and engine's) physical coefficients.

Each observation gives up to two log residuals, of GPU energy and of total time:

    r_E = (ln observed_gpu_j - ln quoted_gpu_j - ln(E(theta) / E(0))) / noise_sigma
    r_T = (ln observed_total_s - ln T(theta)) / noise_sigma

(E, T: service.pricing.calibration.physics.modelled; the quoted latency is T(0) itself, the
quoted energy may be the learned regressor's, corrected by the same ratio), and each
coefficient a prior residual ``theta_i / prior_sigma_i``: a Gaussian prior on the log
multipliers, centred on the catalogue's figures. The sum of squares is minimised by damped
Gauss-Newton (Levenberg-Marquardt) steps from theta = 0 with a finite-difference Jacobian;
the prior keeps the normal equations well posed however few observations there are, and a
coefficient the observations do not inform stays at its prior figure.

Why this shrinks as a refit should: in the linear case one coefficient with sensitivity a
seen n times moves by ``n a^2 tau^2 / (sigma^2 + n a^2 tau^2)`` of what the data ask, the
weight n / (n + k) of the scalar corrections with k = sigma^2 / (a^2 tau^2); with the
default noise 0.2 and prior 0.2 that is k = 1 per unit sensitivity, and several coefficients
share each residual, so tens of observations, not hundreds, move a new GPU most of the way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from service.pricing.calibration.physical_terms import PhysicalTerms, stack
from service.pricing.calibration.physics import PARAMETERS, PRIOR_SIGMA, modelled

FloatArray = npt.NDArray[np.float64]
STEP = 1e-6  # finite-difference step in log multiplier
MAX_ITERATIONS = 30


@dataclass(frozen=True, slots=True)
class PhysicalPoint:
    """One observation against its quote, re-priced uncalibrated: the request's physical terms
    (a group of one), the quoted GPU energy [J], the observed GPU energy [J] and total time [s]
    (None: not measured, or screened out), its scope (GPU, serving engine), model and model
    family, and when the service received it."""

    observation_id: str
    gpu: str
    engine: str
    model: str
    family: str
    terms: PhysicalTerms
    quoted_gpu_j: float
    observed_gpu_j: float
    observed_total_s: float | None
    received_at: datetime

    @property
    def scope(self) -> tuple[str, str]:
        return (self.gpu, self.engine)


@dataclass(frozen=True, slots=True)
class Predicted:
    """[N] each point's modelled energy and total time at the prior and under a refit."""

    energy_before: FloatArray
    energy_after: FloatArray
    total_s_before: FloatArray
    total_s_after: FloatArray

    @property
    def energy_factor(self) -> FloatArray:
        ratio: FloatArray = self.energy_after / self.energy_before
        return ratio

    @property
    def total_s_factor(self) -> FloatArray:
        ratio: FloatArray = self.total_s_after / self.total_s_before
        return ratio


def predicted(points: Sequence[PhysicalPoint], theta: FloatArray) -> Predicted:
    """The model at the prior and at `theta` for every point."""
    terms = stack([p.terms for p in points])
    before = modelled(terms, np.zeros(len(PARAMETERS)))
    after = modelled(terms, theta)
    return Predicted(before.gpu_j, after.gpu_j, before.total_s, after.total_s)


def prior_sigmas() -> FloatArray:
    return np.array([PRIOR_SIGMA[name] for name in PARAMETERS])


def map_theta(points: Sequence[PhysicalPoint], noise_sigma: float) -> FloatArray:
    """The MAP log multipliers of `points` (all of one scope) under the prior; 0 for none."""
    tau = prior_sigmas()
    theta = np.zeros(len(PARAMETERS))
    if not points:
        return theta
    terms = stack([p.terms for p in points])
    prior_model = modelled(terms, theta)
    energy_target = np.log([p.observed_gpu_j / p.quoted_gpu_j for p in points])
    timed = np.array([p.observed_total_s is not None for p in points])
    time_target = np.log([p.observed_total_s or 1.0 for p in points])[timed]

    def residuals(values: FloatArray) -> FloatArray:
        model = modelled(terms, values)
        energy = energy_target - np.log(_positive(model.gpu_j) / _positive(prior_model.gpu_j))
        times = time_target - np.log(_positive(model.total_s[timed]))
        return np.concatenate([energy / noise_sigma, times / noise_sigma, values / tau])

    return _levenberg_marquardt(residuals, theta)


def _positive(values: FloatArray) -> FloatArray:
    """`values` floored at a tiny positive number, so a degenerate point cannot log 0."""
    floored: FloatArray = np.maximum(values, 1e-12)
    return floored


def _levenberg_marquardt(
    residuals: Callable[[FloatArray], FloatArray], theta: FloatArray
) -> FloatArray:
    """Minimise |residuals(theta)|^2 by damped Gauss-Newton steps (Marquardt's scaling)."""
    damping = 1e-3
    r = residuals(theta)
    cost = float(r @ r)
    for _ in range(MAX_ITERATIONS):
        jacobian = np.empty((r.size, theta.size))
        for i in range(theta.size):
            shifted = theta.copy()
            shifted[i] += STEP
            jacobian[:, i] = (residuals(shifted) - r) / STEP
        normal = jacobian.T @ jacobian
        gradient = jacobian.T @ r
        improved = False
        while damping < 1e8:
            lhs = normal + damping * np.diag(np.diag(normal))
            step = np.linalg.solve(lhs, -gradient)
            candidate = theta + step
            r_new = residuals(candidate)
            cost_new = float(r_new @ r_new)
            if math.isfinite(cost_new) and cost_new <= cost:
                theta, r, improved = candidate, r_new, cost - cost_new > 1e-12 * max(cost, 1.0)
                cost = cost_new
                damping = max(damping / 3.0, 1e-9)
                break
            damping *= 4.0
        if not improved or float(np.abs(step).max()) < 1e-7:
            break
    return theta
