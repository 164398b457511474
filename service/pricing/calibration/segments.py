"""The family stage of a calibration: per GPU x model family, a residual energy factor on top of
the GPU's refit, shrunk toward none (see service.pricing.calibration.corrections for why and
the worked numbers)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from service.pricing.calibration.corrections import (
    GLOBAL_SEGMENT,
    Corrections,
    SegmentCorrection,
)


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    """One observation against its quote for the family stage: the predicted (after the GPU's
    refit) and observed GPU energy of the whole request [J], its segment, when it arrived."""

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


def shrinkage_weight(n: int, k: float) -> float:
    """n / (n + k): the share of a segment's mean log ratio that its correction keeps."""
    return n / (n + k) if n + k > 0 else 0.0


def fit_corrections(points: Sequence[CalibrationPoint], shrinkage_k: float) -> Corrections:
    """Each segment's correction, shrunk toward none; the pooled mean reported, not applied."""
    if not points:
        return Corrections.none(shrinkage_k)
    logs = [p.log_ratio for p in points]
    mean_all = math.fsum(logs) / len(logs)
    pooled = SegmentCorrection(*GLOBAL_SEGMENT, len(logs), mean_all, 0.0, 0.0)
    by_segment: dict[tuple[str, str], list[float]] = {}
    for point in points:
        by_segment.setdefault(point.segment, []).append(point.log_ratio)
    segments: dict[tuple[str, str], SegmentCorrection] = {}
    for (gpu, family), values in sorted(by_segment.items()):
        n = len(values)
        mean = math.fsum(values) / n
        w = shrinkage_weight(n, shrinkage_k)
        segments[(gpu, family)] = SegmentCorrection(gpu, family, n, mean, w, w * mean)
    return Corrections(shrinkage_k, pooled, segments)
