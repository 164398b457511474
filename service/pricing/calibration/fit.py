"""Fitting a calibration: screen, split by time, fit shrunk log corrections, score.

The observations are ordered by when they arrived; the newest `holdout_fraction` (20 %)
are held out and the correction is fitted on the older ones only, so the reported error after
calibration is that of the calibration as applied, on data it did not see, in the order it
will meet new data. The applied calibration is the one scored (not refitted on all): the
number reported is the number shipped.

Error is the mean absolute percentage error of GPU energy, ``mean(|predicted - observed| /
observed)``, before (uncalibrated predictions) and after (times the segment's factor).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from service.pricing.calibration.corrections import GLOBAL_SEGMENT, Corrections, SegmentCorrection
from service.pricing.calibration.screening import Flag, screen


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    """One observation against its quote: the uncalibrated predicted and the observed GPU
    energy of the whole request [J], the segment it belongs to, and when the service received
    it (the caller's `measured_at` is untrusted, so the holdout is ordered by arrival)."""

    observation_id: str
    gpu: str
    family: str
    predicted_gpu_j: float
    observed_gpu_j: float
    received_at: datetime

    @property
    def segment(self) -> tuple[str, str]:
        return (self.gpu, self.family)

    @property
    def log_ratio(self) -> float:
        return math.log(self.observed_gpu_j / self.predicted_gpu_j)


@dataclass(frozen=True, slots=True)
class FitSettings:
    """`shrinkage_k`: pseudo-count of the shrinkage weight n / (n + k); `holdout_fraction`: the
    newest share of observations scored, not fitted; `max_ratio`, `outlier_z`: the screens."""

    shrinkage_k: float = 10.0
    holdout_fraction: float = 0.2
    max_ratio: float = 20.0
    outlier_z: float = 3.5


@dataclass(frozen=True, slots=True)
class CalibrationFit:
    """A fitted calibration and how it was obtained and scored."""

    corrections: Corrections
    settings: FitSettings
    fitted: int
    held_out: int
    flagged: dict[str, Flag] = field(default_factory=dict)  # observation id -> why
    holdout_mape_before: float | None = None
    holdout_mape_after: float | None = None

    @property
    def count_out_of_range(self) -> int:
        return sum(1 for f in self.flagged.values() if f is Flag.OUT_OF_RANGE)

    @property
    def count_outliers(self) -> int:
        return sum(1 for f in self.flagged.values() if f is Flag.OUTLIER)


def shrinkage_weight(n: int, k: float) -> float:
    """n / (n + k): the share of a segment's mean log ratio that its correction keeps."""
    return n / (n + k) if n + k > 0 else 0.0


def fit_corrections(points: Sequence[CalibrationPoint], shrinkage_k: float) -> Corrections:
    """Global correction shrunk toward none, each segment's shrunk toward the global one."""
    if not points:
        return Corrections.none(shrinkage_k)
    logs = [p.log_ratio for p in points]
    n_all = len(logs)
    mean_all = math.fsum(logs) / n_all
    w_all = shrinkage_weight(n_all, shrinkage_k)
    global_delta = w_all * mean_all
    global_correction = SegmentCorrection(*GLOBAL_SEGMENT, n_all, mean_all, w_all, global_delta)
    by_segment: dict[tuple[str, str], list[float]] = {}
    for point in points:
        by_segment.setdefault(point.segment, []).append(point.log_ratio)
    segments: dict[tuple[str, str], SegmentCorrection] = {}
    for (gpu, family), values in sorted(by_segment.items()):
        n = len(values)
        mean = math.fsum(values) / n
        w = shrinkage_weight(n, shrinkage_k)
        delta = global_delta + w * (mean - global_delta)
        segments[(gpu, family)] = SegmentCorrection(gpu, family, n, mean, w, delta)
    return Corrections(shrinkage_k, global_correction, segments)


def mape(predicted: Sequence[float], observed: Sequence[float]) -> float | None:
    """Mean absolute percentage error [fraction]; None for no points."""
    if not observed:
        return None
    errors = [abs(p - o) / o for p, o in zip(predicted, observed, strict=True)]
    return math.fsum(errors) / len(errors)


def holdout_size(n: int, fraction: float) -> int:
    """How many of `n` observations (the newest) are held out: fraction x n, rounded half up,
    leaving at least one to fit."""
    return max(0, min(n - 1, math.floor(fraction * n + 0.5)))


def fit_calibration(
    points: Sequence[CalibrationPoint], settings: FitSettings = FitSettings()
) -> CalibrationFit:
    """Screen `points`, fit on the older ones and score on the newest (see the module doc)."""
    screened = screen(
        [p.observed_gpu_j for p in points],
        [p.predicted_gpu_j for p in points],
        [p.segment for p in points],
        max_ratio=settings.max_ratio,
        outlier_z=settings.outlier_z,
    )
    flagged = {
        p.observation_id: flag
        for p, flag in zip(points, screened.flags, strict=True)
        if flag is not None
    }
    clean = sorted(
        (points[i] for i in screened.kept()), key=lambda p: (p.received_at, p.observation_id)
    )
    n_hold = holdout_size(len(clean), settings.holdout_fraction) if clean else 0
    train, held = clean[: len(clean) - n_hold], clean[len(clean) - n_hold :]
    corrections = fit_corrections(train, settings.shrinkage_k)
    observed = [p.observed_gpu_j for p in held]
    before = mape([p.predicted_gpu_j for p in held], observed)
    after = mape(
        [p.predicted_gpu_j * corrections.factor_for(p.gpu, p.family) for p in held], observed
    )
    return CalibrationFit(corrections, settings, len(train), len(held), flagged, before, after)
