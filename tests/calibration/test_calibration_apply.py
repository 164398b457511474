"""The estimator applies a calibration to the model version it corrects, and a GPU's refit to
that GPU's quotes only: energy and latency moved by the model's own ratio under the refit."""

from __future__ import annotations

import math

import pytest

from service.pricing.calibration import (
    PARAMETERS,
    ActiveCalibration,
    Corrections,
    GpuFit,
    HeldOutError,
)
from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EXAMPLE_REQUEST, EstimateRequest

H100 = "H100-SXM5-80GB"


def host_time_fit(engine: str, multiplier: float, active: bool = True) -> GpuFit:
    theta = tuple(math.log(multiplier) if p == "host_time" else 0.0 for p in PARAMETERS)
    return GpuFit(H100, engine, 20, 20, theta, HeldOutError(), active, "")


def test_applied_to_its_gpu_engine_and_model_version_only() -> None:
    estimator = Estimator.from_catalogues()
    request = EstimateRequest.model_validate(EXAMPLE_REQUEST)
    plain = estimator.estimate(request).response
    engine = estimator.resolve(request).engine
    pooled = Corrections.none(10.0).global_correction
    corrections = Corrections(10.0, pooled, {}, {(H100, engine): host_time_fit(engine, 2.0)})
    own = ActiveCalibration("c_1", estimator.model_version, corrections)
    calibrated = estimator.estimate(request, calibration=own).response
    assert calibrated.calibration_id == "c_1"
    # Host time doubled: each phase's time grows by its own host-side time, so prefill and
    # decode move by different factors and the total is their sum; energy follows.
    assert calibrated.latency.total_s == pytest.approx(
        calibrated.latency.prefill_s + calibrated.latency.decode_s
    )
    assert plain.latency.total_s < calibrated.latency.total_s < 2 * plain.latency.total_s
    decode_factor = calibrated.latency.decode_s / plain.latency.decode_s
    assert calibrated.latency.time_per_output_token_s == pytest.approx(
        plain.latency.time_per_output_token_s * decode_factor
    )
    assert calibrated.latency.total_s_high / calibrated.latency.total_s == pytest.approx(
        plain.latency.total_s_high / plain.latency.total_s
    )
    factor = calibrated.energy.calibration_factor
    assert factor > 1 and calibrated.energy.gpu_j == pytest.approx(plain.energy.gpu_j * factor)

    a100 = EstimateRequest.model_validate(
        {**EXAMPLE_REQUEST, "hardware": {"gpu": "A100-SXM4-80GB", "count": 2}}
    )
    untouched = estimator.estimate(a100, calibration=own).response
    assert untouched.energy.calibration_factor == 1.0
    assert untouched.latency == estimator.estimate(a100).response.latency

    other_engine = Corrections(10.0, pooled, {}, {(H100, "sglang"): host_time_fit("sglang", 2.0)})
    inactive = Corrections(
        10.0, pooled, {}, {(H100, engine): host_time_fit(engine, 2.0, active=False)}
    )
    for corrections in (other_engine, inactive):
        priced = estimator.estimate(
            request, calibration=ActiveCalibration("c_2", estimator.model_version, corrections)
        ).response
        assert priced.energy.gpu_j == plain.energy.gpu_j and priced.latency == plain.latency

    stale = ActiveCalibration("c_0", "roofline 1999.1.1", corrections)
    ignored = estimator.estimate(request, calibration=stale).response
    assert ignored.calibration_id is None and ignored.energy.gpu_j == plain.energy.gpu_j


def test_in_one_pass_only_the_fitted_gpus_rows_move() -> None:
    """A pass prices many contexts at once: an H100 refit moves the H100 rows of the pass, as
    each is moved priced alone, and leaves the A100 rows as they are uncalibrated."""
    estimator = Estimator.from_catalogues()
    h100 = EstimateRequest.model_validate(EXAMPLE_REQUEST)
    a100 = EstimateRequest.model_validate(
        {**EXAMPLE_REQUEST, "hardware": {"gpu": "A100-SXM4-80GB", "count": 2}}
    )
    engine = estimator.resolve(h100).engine
    pooled = Corrections.none(10.0).global_correction
    corrections = Corrections(10.0, pooled, {}, {(H100, engine): host_time_fit(engine, 2.0)})
    own = ActiveCalibration("c_1", estimator.model_version, corrections)
    mixed = estimator.price([a100, h100, a100, h100], calibration=own)
    alone = {
        "h100": estimator.estimate(h100, calibration=own).response,
        "a100": estimator.estimate(a100).response,
    }
    for priced, name in zip(mixed, ("a100", "h100", "a100", "h100"), strict=True):
        assert not isinstance(priced, Exception)
        response = priced.response
        assert response.energy.gpu_j == pytest.approx(alone[name].energy.gpu_j, rel=1e-12)
        assert response.latency.total_s == pytest.approx(alone[name].latency.total_s, rel=1e-12)
        assert (response.energy.calibration_factor > 1.0) == (name == "h100")
