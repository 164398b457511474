"""Accuracy metrics for predicted-vs-measured comparisons."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Accuracy:
    """MAPE [%] and the share of predictions within 10% and 30% of the measurement [%]."""

    count: int
    mape_pct: float
    within_10_pct: float
    within_30_pct: float
    median_ratio: float

    def as_row(self) -> list[str]:
        return [
            str(self.count),
            f"{self.mape_pct:.1f}",
            f"{self.within_10_pct:.0f}",
            f"{self.within_30_pct:.0f}",
            f"{self.median_ratio:.3f}",
        ]


def accuracy(predicted: FloatArray, measured: FloatArray) -> Accuracy:
    """Accuracy of `predicted` against `measured` (both positive, same shape)."""
    if len(measured) == 0:
        return Accuracy(0, float("nan"), float("nan"), float("nan"), float("nan"))
    relative = np.abs(predicted - measured) / measured
    return Accuracy(
        count=len(measured),
        mape_pct=float(100.0 * relative.mean()),
        within_10_pct=float(100.0 * (relative <= 0.10).mean()),
        within_30_pct=float(100.0 * (relative <= 0.30).mean()),
        median_ratio=float(np.median(predicted / measured)),
    )
