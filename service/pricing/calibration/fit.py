"""Fitting a calibration: screen, refit each GPU's physical coefficients, score by k-fold,
activate what improves.

1. Screen the observations (service.pricing.calibration.screening) on their energy; a total
   time outside the same range of the model's is dropped (the energy is kept).
2. Refit, per GPU x serving engine, the physical coefficients by MAP (map_fit), then per GPU x
   family the shrunk residual energy factor (corrections).
3. Score by k-fold within the observations (k = round(1 / holdout_fraction)), grouped by
   model: each observation is predicted by the calibration fitted on the other folds, which
   hold none of its model's observations (they share the model's own error, so a split by row
   would score a refit on models it has seen; the fit must hold for the GPU's other models).
   With one model only, the folds are taken in turn by order of arrival. A GPU's fit is
   active only with `min_observations` and, out of fold, an energy error and a latency error
   no worse than the uncalibrated quotes' and one of them better.
   The calibration stored is the one fitted on all of them; `holdout_*` is the out-of-fold
   error of the calibration as applied (an inactive GPU's quotes keep their error).
4. Keep the out-of-fold residuals, ln(observed / predicted) of energy and of total time per
   observation (`Residual`), and store per GPU fit their split-conformal quantiles at
   `interval_quantiles`: the intervals of the quotes the fit moves
   (service.pricing.calibration.calibrated_intervals).

Error is the mean absolute percentage error, ``mean(|predicted - observed| / observed)``, of
GPU energy and of total time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from service.pricing.calibration.calibrated_intervals import Residual, scope_quantiles
from service.pricing.calibration.corrections import Corrections, GpuFit, HeldOutError
from service.pricing.calibration.map_fit import PhysicalPoint, map_theta, predicted
from service.pricing.calibration.physics import PARAMETERS
from service.pricing.calibration.screening import Flag, in_range, screen
from service.pricing.calibration.segments import CalibrationPoint, fit_corrections


@dataclass(frozen=True, slots=True)
class FitSettings:
    """`shrinkage_k`: pseudo-count of the family segments' weight n / (n + k);
    `holdout_fraction`: the share each of the k folds holds out (k = round(1 / it)); `max_ratio`,
    `outlier_z`: the screens; `min_observations`: fewer and a GPU's fit stays inactive;
    `noise_sigma`: the log scatter of one observation about the model (map_fit);
    `interval_quantiles`: the nominal quantiles of the residuals' bounds (the quotes')."""

    shrinkage_k: float = 10.0
    holdout_fraction: float = 0.2
    max_ratio: float = 20.0
    outlier_z: float = 3.5
    min_observations: int = 8
    noise_sigma: float = 0.2
    interval_quantiles: tuple[float, float] = (0.1, 0.9)


@dataclass(frozen=True, slots=True)
class CalibrationFit:
    """A fitted calibration and how it was obtained and scored (out of fold)."""

    corrections: Corrections
    settings: FitSettings
    fitted: int
    held_out: int
    flagged: dict[str, Flag] = field(default_factory=dict)  # observation id -> why
    holdout: HeldOutError = field(default_factory=HeldOutError)
    with_latency: int = 0
    residuals: tuple[Residual, ...] = ()

    @property
    def holdout_mape_before(self) -> float | None:
        return self.holdout.energy_before

    @property
    def holdout_mape_after(self) -> float | None:
        return self.holdout.energy_after

    @property
    def count_out_of_range(self) -> int:
        return sum(1 for f in self.flagged.values() if f is Flag.OUT_OF_RANGE)

    @property
    def count_outliers(self) -> int:
        return sum(1 for f in self.flagged.values() if f is Flag.OUTLIER)


def mape(predicted: Sequence[float], observed: Sequence[float]) -> float | None:
    """Mean absolute percentage error [fraction]; None for no points."""
    if not observed:
        return None
    errors = [abs(p - o) / o for p, o in zip(predicted, observed, strict=True)]
    return math.fsum(errors) / len(errors)


def fold_count(n: int, fraction: float) -> int:
    """k of the k-fold scoring: round(1 / fraction), at most n; 0 (no scoring) below 2."""
    if fraction <= 0 or n < 2:
        return 0
    k = min(n, max(2, math.floor(1.0 / fraction + 0.5)))
    return k


def fit_scopes(points: Sequence[PhysicalPoint], settings: FitSettings) -> Corrections:
    """Refit every GPU x engine in `points`, then the family segments on what remains (every
    fit is returned inactive: activation is the scoring's call)."""
    by_scope: dict[tuple[str, str], list[PhysicalPoint]] = {}
    for point in points:
        by_scope.setdefault(point.scope, []).append(point)
    fits: dict[tuple[str, str], GpuFit] = {}
    residual: list[CalibrationPoint] = []
    for (gpu, engine), members in sorted(by_scope.items()):
        theta = map_theta(members, settings.noise_sigma)
        n_latency = sum(1 for p in members if p.observed_total_s is not None)
        fits[(gpu, engine)] = GpuFit(
            gpu, engine, len(members), n_latency, tuple(theta.tolist()), HeldOutError(), False, ""
        )
        moved = predicted(members, theta).energy_factor
        residual.extend(
            CalibrationPoint(
                p.observation_id,
                p.gpu,
                p.family,
                p.quoted_gpu_j * float(f),
                p.observed_gpu_j,
                p.received_at,
            )
            for p, f in zip(members, moved, strict=True)
        )
    segments = fit_corrections(residual, settings.shrinkage_k)
    return replace(segments, fits=fits)


@dataclass(frozen=True, slots=True)
class _Scored:
    """One observation's quote before and, out of fold, after calibration."""

    point: PhysicalPoint
    energy_after: float
    total_s_before: float
    total_s_after: float


def folds(points: Sequence[PhysicalPoint], fraction: float) -> list[int]:
    """Each point's fold: its model's (models numbered by first arrival, dealt in turn into
    k = fold_count folds, at most one per model); by arrival when all share one model."""
    models: dict[str, int] = {}
    for point in points:
        models.setdefault(point.model, len(models))
    if len(models) >= 2:
        k = min(fold_count(len(points), fraction), len(models))
        return [models[p.model] % k if k else -1 for p in points]
    k = fold_count(len(points), fraction)
    return [i % k if k else -1 for i in range(len(points))]


def _out_of_fold(points: Sequence[PhysicalPoint], settings: FitSettings) -> list[_Scored]:
    assigned = folds(points, settings.holdout_fraction)
    scored: list[_Scored] = []
    for fold in sorted(set(assigned) - {-1}):
        train = [p for p, f in zip(points, assigned, strict=True) if f != fold]
        test = [p for p, f in zip(points, assigned, strict=True) if f == fold]
        corrections = fit_scopes(train, settings)
        for point in test:
            fit = corrections.fits.get(point.scope)
            theta = fit.theta_array if fit is not None else np.zeros(len(PARAMETERS))
            model = predicted([point], theta)
            family = corrections.factor_for(point.gpu, point.family) if fit else 1.0
            scored.append(
                _Scored(
                    point,
                    point.quoted_gpu_j * float(model.energy_factor[0]) * family,
                    float(model.total_s_before[0]),
                    float(model.total_s_after[0]),
                )
            )
    return scored


def _errors(scored: Sequence[_Scored]) -> HeldOutError:
    energy = [s.point.observed_gpu_j for s in scored]
    timed = [s for s in scored if s.point.observed_total_s is not None]
    times = [s.point.observed_total_s or 0.0 for s in timed]
    return HeldOutError(
        mape([s.point.quoted_gpu_j for s in scored], energy),
        mape([s.energy_after for s in scored], energy),
        mape([s.total_s_before for s in timed], times),
        mape([s.total_s_after for s in timed], times),
    )


def activation(n: int, held_out: HeldOutError, settings: FitSettings) -> tuple[bool, str]:
    """Whether a GPU's fit is used, and why (not)."""
    if n < settings.min_observations:
        return False, f"{n} observations, fewer than the {settings.min_observations} required"
    if held_out.energy_before is None or held_out.energy_after is None:
        return False, "no held-out scoring (holdout_fraction 0)"
    pairs = {"energy": (held_out.energy_before, held_out.energy_after)}
    if held_out.latency_before is not None and held_out.latency_after is not None:
        pairs["total time"] = (held_out.latency_before, held_out.latency_after)
    rising = [name for name, (before, after) in pairs.items() if after > before]
    if rising:
        return False, f"held-out {' and '.join(rising)} error would rise"
    if not any(after < before for before, after in pairs.values()):
        return False, "held-out error does not fall"
    return True, "held-out error falls"


def fit_calibration(
    points: Sequence[PhysicalPoint], settings: FitSettings = FitSettings()
) -> CalibrationFit:
    """Screen `points`, refit, score out of fold and activate (see the module doc)."""
    screened = screen(
        [p.observed_gpu_j for p in points],
        [p.quoted_gpu_j for p in points],
        [(p.gpu, p.family) for p in points],
        max_ratio=settings.max_ratio,
        outlier_z=settings.outlier_z,
    )
    flagged = {
        p.observation_id: flag
        for p, flag in zip(points, screened.flags, strict=True)
        if flag is not None
    }
    clean = sorted(
        (_latency_screened(points[i], settings.max_ratio) for i in screened.kept()),
        key=lambda p: (p.received_at, p.observation_id),
    )
    corrections = fit_scopes(clean, settings)
    scored = _out_of_fold(clean, settings)
    residuals = tuple(r for s in scored for r in _residuals(s))
    fits = {}
    active_scopes = set()
    for scope, fit in corrections.fits.items():
        held = _errors([s for s in scored if s.point.scope == scope])
        active, reason = activation(fit.n, held, settings)
        own = [r for r in residuals if r.scope == scope]
        quantiles = scope_quantiles(own, settings.interval_quantiles)
        fits[scope] = replace(fit, held_out=held, active=active, reason=reason, quantiles=quantiles)
        if active:
            active_scopes.add(scope)
    as_applied = [  # an inactive GPU's quotes keep their error
        s
        if s.point.scope in active_scopes
        else replace(s, energy_after=s.point.quoted_gpu_j, total_s_after=s.total_s_before)
        for s in scored
    ]
    return CalibrationFit(
        replace(corrections, fits=fits),
        settings,
        len(clean),
        len(scored),
        flagged,
        _errors(as_applied),
        sum(1 for p in clean if p.observed_total_s is not None),
        residuals,
    )


def _residuals(scored: _Scored) -> list[Residual]:
    """The out-of-fold residuals of one scored observation: energy, and total time if posted."""
    point = scored.point
    energy = math.log(point.observed_gpu_j / scored.energy_after)
    found = [Residual(point.observation_id, point.scope, point.model, "energy", energy)]
    if point.observed_total_s is not None:
        total = math.log(point.observed_total_s / scored.total_s_after)
        found.append(Residual(point.observation_id, point.scope, point.model, "total", total))
    return found


def _latency_screened(point: PhysicalPoint, max_ratio: float) -> PhysicalPoint:
    """`point` without its total time when that is outside `max_ratio` of the model's."""
    observed = point.observed_total_s
    if observed is None:
        return point
    model = float(predicted([point], np.zeros(len(PARAMETERS))).total_s_before[0])
    return point if in_range(observed, model, max_ratio) else replace(point, observed_total_s=None)
