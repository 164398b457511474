"""The estimator applies a calibration only to the model version it corrects."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.pricing.calibration import ActiveCalibration, fit_corrections
from service.pricing.calibration.fit import CalibrationPoint
from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EXAMPLE_REQUEST, EstimateRequest

T0 = datetime(2026, 11, 22, tzinfo=UTC)


def test_applied_to_its_model_version_only() -> None:
    estimator = Estimator.from_catalogues()
    points = [
        CalibrationPoint(f"o{i}", "H100-SXM5-80GB", "llama", 100.0, 150.0, T0) for i in range(90)
    ]
    corrections = fit_corrections(points, shrinkage_k=10.0)
    request = EstimateRequest.model_validate(EXAMPLE_REQUEST)
    plain = estimator.estimate(request).response
    own = ActiveCalibration("c_1", estimator.model_version, corrections)
    calibrated = estimator.estimate(request, calibration=own).response
    factor = corrections.factor_for("H100-SXM5-80GB", "llama")
    assert calibrated.calibration_id == "c_1"
    assert calibrated.energy.gpu_j == pytest.approx(plain.energy.gpu_j * factor)
    assert calibrated.latency == plain.latency
    stale = ActiveCalibration("c_0", "roofline 1999.1.1", corrections)
    ignored = estimator.estimate(request, calibration=stale).response
    assert ignored.calibration_id is None and ignored.energy.gpu_j == plain.energy.gpu_j
