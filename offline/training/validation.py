"""Leave-one-family-out cross-validation of the regressor, its ablations and the baselines, on
ML.ENERGY energy per request, and the held-out residual interval with its measured coverage."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from offline.training.baselines import ecologits_log_j, llmcarbon_log_j, served_log_j
from offline.training.dataset import TrainingRow, log_served
from offline.training.fit import TrainConfig, Variant, predict_log_j, train_ensemble
from offline.training.sampling import focused_weights

FloatArray = npt.NDArray[np.float64]
INTERVAL_QUANTILES = (0.1, 0.9)


@dataclass(frozen=True, slots=True)
class Priors:
    """What focused sampling weighs against: catalogue model sizes and trace output lengths."""

    catalogue_active_parameters: FloatArray
    trace_output_tokens: FloatArray

    def weights(self, rows: Sequence[TrainingRow], focused: bool) -> FloatArray:
        if not focused:
            return np.ones(len(rows))
        return focused_weights(
            [r.active_parameters for r in rows],
            [r.output_tokens for r in rows],
            self.catalogue_active_parameters.tolist(),
            self.trace_output_tokens.tolist(),
        )


@dataclass(frozen=True, slots=True)
class ErrorBounds:
    """MAPE [%], shares within 5/10/30 % [%] and the median predicted/measured ratio."""

    count: int
    mape_pct: float
    within_5_pct: float
    within_10_pct: float
    within_30_pct: float
    median_ratio: float


def error_bounds(log_predicted: FloatArray, log_measured: FloatArray) -> ErrorBounds:
    if len(log_measured) == 0:
        nan = float("nan")
        return ErrorBounds(0, nan, nan, nan, nan, nan)
    ratio = np.exp(log_predicted - log_measured)
    relative = np.abs(ratio - 1.0)
    return ErrorBounds(
        count=len(relative),
        mape_pct=float(100 * relative.mean()),
        within_5_pct=float(100 * (relative <= 0.05).mean()),
        within_10_pct=float(100 * (relative <= 0.10).mean()),
        within_30_pct=float(100 * (relative <= 0.30).mean()),
        median_ratio=float(np.median(ratio)),
    )


def families_of(rows: Sequence[TrainingRow]) -> list[str]:
    return sorted({r.family for r in rows})


Folds = Mapping[str, Sequence[TrainingRow]]
"""Per held-out family, every row encoded with the analytical coefficients of that fold (the
same rows in the same order in every fold)."""


def fixed_folds(rows: Sequence[TrainingRow]) -> Folds:
    """Every fold encoded with the same coefficients (smoke runs)."""
    return {family: rows for family in families_of(rows)}


def leave_family_out(
    folds: Folds,
    predict: Callable[[list[TrainingRow], list[TrainingRow], str], FloatArray],
) -> FloatArray:
    """Held-out log predictions of every row, each from a fit without its family."""
    reference = [r.row_ref for r in next(iter(folds.values()))]
    out = np.full(len(reference), np.nan)
    for family, rows in folds.items():
        if [r.row_ref for r in rows] != reference:
            raise ValueError(f"fold {family!r} does not hold the same rows")
        test_mask = np.array([r.family == family for r in rows])
        train = [r for r, t in zip(rows, test_mask, strict=True) if not t]
        test = [r for r, t in zip(rows, test_mask, strict=True) if t]
        out[test_mask] = predict(train, test, family)
    return out


def regressor_cv(
    folds: Folds,
    variant: Variant,
    configs: Mapping[str, TrainConfig],
    priors: Priors,
) -> FloatArray:
    """Held-out log energy of every row from ensembles trained without its family, each with
    the configuration of its held-out family (chosen by inner validation that never saw it),
    as the service quotes it (dataset.log_served)."""

    def predict(train: list[TrainingRow], test: list[TrainingRow], family: str) -> FloatArray:
        weights = priors.weights(train, variant.focused)
        config = configs[family]
        model = train_ensemble(train, weights, variant, config, desc=f"{variant.name} -{family}")
        return log_served(test, predict_log_j(model, test))

    return leave_family_out(folds, predict)


def baseline_cv(folds: Folds) -> dict[str, FloatArray]:
    """Held-out log energy of every row from each baseline."""
    return {
        "analytical": leave_family_out(folds, lambda _, test, __: served_log_j(test)),
        "llmcarbon": leave_family_out(folds, lambda tr, te, _: llmcarbon_log_j(tr, te)),
        "ecologits": leave_family_out(folds, lambda tr, te, _: ecologits_log_j(tr, te)),
    }


@dataclass(frozen=True, slots=True)
class Interval:
    """Ratios measured/predicted at the quantiles, from all held-out residuals, and the coverage
    of the interval when each family's bounds come only from the other families' residuals."""

    lower_quantile: float
    upper_quantile: float
    low_ratio: float
    high_ratio: float
    nested_coverage_pct: float
    coverage_by_family: dict[str, float]


def residual_interval(
    rows: Sequence[TrainingRow], log_predicted: FloatArray, log_measured: FloatArray
) -> Interval:
    residual = log_measured - log_predicted
    low_q, high_q = INTERVAL_QUANTILES
    families = np.array([r.family for r in rows])
    covered = np.zeros(len(rows), dtype=bool)
    by_family = {}
    for family in families_of(rows):
        mask = families == family
        low, high = np.quantile(residual[~mask], [low_q, high_q])
        covered[mask] = (residual[mask] >= low) & (residual[mask] <= high)
        by_family[family] = float(100 * covered[mask].mean())
    low, high = np.quantile(residual, [low_q, high_q])
    return Interval(
        lower_quantile=low_q,
        upper_quantile=high_q,
        low_ratio=float(np.exp(low)),
        high_ratio=float(np.exp(high)),
        nested_coverage_pct=float(100 * covered.mean()),
        coverage_by_family=by_family,
    )
