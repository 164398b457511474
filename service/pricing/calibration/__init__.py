"""Recalibration from observed energy and time: pure fitting logic (no web, database or settings).

`physical_terms` reads off an estimate what a refit moves, `physics` evaluates the model under
refitted coefficients, `map_fit` refits one GPU's coefficients (MAP, shrunk toward the
catalogue), `screening` decides which observations may be fitted, `segments` fits the residual
family factors, `corrections` holds a fitted calibration and applies it, and `fit` fits one
from observations, scored by k-fold. The service's adapter (`service/quotes/recalibration.py`)
re-prices the observations' quotes, reads them from the database and stores the result.
"""

from service.pricing.calibration.corrections import (
    GLOBAL_SEGMENT,
    ActiveCalibration,
    Corrections,
    GpuFit,
    HeldOutError,
    SegmentCorrection,
)
from service.pricing.calibration.fit import CalibrationFit, FitSettings, fit_calibration, mape
from service.pricing.calibration.map_fit import PhysicalPoint, map_theta
from service.pricing.calibration.physical_terms import PhysicalTerms, physical_terms, stack
from service.pricing.calibration.physics import PARAMETERS, Factors
from service.pricing.calibration.screening import Flag, screen
from service.pricing.calibration.segments import CalibrationPoint, fit_corrections

__all__ = [
    "GLOBAL_SEGMENT",
    "PARAMETERS",
    "ActiveCalibration",
    "CalibrationFit",
    "CalibrationPoint",
    "Corrections",
    "Factors",
    "FitSettings",
    "Flag",
    "GpuFit",
    "HeldOutError",
    "PhysicalPoint",
    "PhysicalTerms",
    "SegmentCorrection",
    "fit_calibration",
    "fit_corrections",
    "map_theta",
    "mape",
    "physical_terms",
    "screen",
    "stack",
]
