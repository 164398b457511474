"""Recalibration from observed energy: pure fitting logic (no web, database or settings).

`screening` decides which observations may be fitted (range check, robust outliers),
`corrections` holds a fitted calibration's per-segment factors and applies them, and `fit`
fits one from observations with a time-ordered holdout. The service's adapter
(`service/quotes/recalibration.py`) reads observations from the database and stores the result.
"""

from service.pricing.calibration.corrections import (
    GLOBAL_SEGMENT,
    ActiveCalibration,
    Corrections,
    SegmentCorrection,
)
from service.pricing.calibration.fit import (
    CalibrationFit,
    CalibrationPoint,
    FitSettings,
    fit_calibration,
    fit_corrections,
    mape,
)
from service.pricing.calibration.screening import Flag, screen

__all__ = [
    "GLOBAL_SEGMENT",
    "ActiveCalibration",
    "CalibrationFit",
    "CalibrationPoint",
    "Corrections",
    "FitSettings",
    "Flag",
    "SegmentCorrection",
    "fit_calibration",
    "fit_corrections",
    "mape",
    "screen",
]
