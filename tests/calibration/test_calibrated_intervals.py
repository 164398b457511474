"""A calibration's intervals: the split-conformal quantiles of its k-fold residuals (order
statistics worked by hand), stored with its GPU fit, and the bounds of the quotes it moves:
estimate x exp(quantiles) with enough residuals, never narrower than the level's with few, the
level's with too few for the order statistics."""

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
from service.pricing.calibration.calibrated_intervals import (
    Residual,
    ResidualQuantiles,
    residual_quantiles,
    scope_quantiles,
)
from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EXAMPLE_REQUEST, EstimateRequest
from service.schemas.estimate_response import EstimateResponse

H100 = "H100-SXM5-80GB"
SCOPE = (H100, "vllm-v1")
# 21 energy residuals, -0.10 .. +0.10 in steps of 0.01, in no order, over three models.
ENERGY = [0.03, -0.10, 0.07, 0.00, -0.04, 0.10, -0.08, 0.05, -0.01, 0.09, -0.06,
          0.02, -0.09, 0.06, -0.03, 0.08, -0.07, 0.01, -0.05, 0.04, -0.02]  # fmt: skip


def test_stored_quantiles_are_the_finite_sample_order_statistics() -> None:
    """n = 21 at 0.1 / 0.9: k_lo = floor(22 x 0.1) = 2, k_hi = ceil(22 x 0.9) = ceil(19.8) =
    20, so the 2nd smallest (-0.09) and the 20th smallest, 2nd largest (+0.09). Total time:
    8 residuals, k_lo = floor(0.9) = 0, no bounds. Stored and read back with the fit."""
    models = ["a", "b", "c"]
    residuals = [
        Residual(f"o{i}", SCOPE, models[i % 3], "energy", r) for i, r in enumerate(ENERGY)
    ] + [Residual(f"t{i}", SCOPE, "a", "total", 0.1 * i) for i in range(8)]
    quantiles = scope_quantiles(residuals, (0.1, 0.9))
    energy, total = quantiles["energy"], quantiles["total"]
    assert (energy.n, energy.groups) == (21, 3)
    assert energy.lower_log == pytest.approx(-0.09) and energy.upper_log == pytest.approx(0.09)
    assert energy.stands_alone
    assert (total.n, total.groups, total.lower_log, total.upper_log) == (8, 1, None, None)
    fit = GpuFit(H100, "vllm-v1", 21, 8, (0.0,) * len(PARAMETERS), HeldOutError(), True, "",
                 quantiles)  # fmt: skip
    assert GpuFit.from_payload(fit.to_payload()) == fit
    older = fit.to_payload()  # a calibration stored before fits kept their quantiles
    del older["quantiles"]
    assert GpuFit.from_payload(older).quantiles == {}


def test_the_residuals_mape_is_their_mean_relative_error() -> None:
    # measured / predicted 2, 1/2, 1: predicted off by |1/2 - 1|, |2 - 1|, 0: mean 0.5.
    found = residual_quantiles("energy", [math.log(2), math.log(0.5), 0.0], ["m"] * 3, 0.1, 0.9)
    assert found is not None and found.mape == pytest.approx(0.5)
    assert found.lower_log is None  # three scores: no 0.1 order statistic
    assert residual_quantiles("energy", [], [], 0.1, 0.9) is None


def calibrated(
    estimator: Estimator, energy: ResidualQuantiles, total: ResidualQuantiles
) -> tuple[EstimateResponse, EstimateResponse]:
    """The example request priced plain and under an active fit that moves its host time x1.2,
    with the residual quantiles given."""
    request = EstimateRequest.model_validate(EXAMPLE_REQUEST)
    engine = estimator.resolve(request).engine
    theta = tuple(math.log(1.2) if p == "host_time" else 0.0 for p in PARAMETERS)
    fit = GpuFit(H100, engine, 40, 40, theta, HeldOutError(), True, "",
                 {"energy": energy, "total": total})  # fmt: skip
    pooled = Corrections.none(10.0).global_correction
    corrections = Corrections(10.0, pooled, {}, {(H100, engine): fit})
    own = ActiveCalibration("c_1", estimator.model_version, corrections)
    plain = estimator.estimate(request).response
    return plain, estimator.estimate(request, calibration=own).response


def quantiles(
    quantity: str, n: int, groups: int, low: float | None, high: float | None
) -> ResidualQuantiles:
    return ResidualQuantiles(quantity, n, groups, 0.1, 0.9, low, high, 0.12)


def test_a_calibrated_quote_takes_its_fits_quantiles() -> None:
    estimator = Estimator.from_catalogues()
    plain, moved = calibrated(
        estimator, quantiles("energy", 40, 4, -0.2, 0.15), quantiles("total", 40, 4, -0.1, 0.3)
    )
    energy, latency = moved.energy, moved.latency
    assert energy.gpu_j != plain.energy.gpu_j  # the fit moved it
    assert energy.gpu_j_low == pytest.approx(energy.gpu_j * math.exp(-0.2), rel=1e-12)
    assert energy.gpu_j_high == pytest.approx(energy.gpu_j * math.exp(0.15), rel=1e-12)
    for name in ("total_s", "decode_s", "time_per_output_token_s"):
        value = getattr(latency, name)
        assert getattr(latency, f"{name}_low") == pytest.approx(value * math.exp(-0.1), rel=1e-12)
        assert getattr(latency, f"{name}_high") == pytest.approx(value * math.exp(0.3), rel=1e-12)
    # No observation measures the prefill alone: it keeps its level's ratios.
    assert latency.prefill_s_high / latency.prefill_s == pytest.approx(
        plain.latency.prefill_s_high / plain.latency.prefill_s, rel=1e-12
    )
    validation = moved.validation
    assert validation.held_out["energy"].model_dump() == {
        "level": "calibration",
        "rows": 40,
        "mape_pct": pytest.approx(12.0),
        "lower_ratio": pytest.approx(math.exp(-0.2)),
        "upper_ratio": pytest.approx(math.exp(0.15)),
    }
    assert validation.held_out["tpot"].upper_ratio == pytest.approx(math.exp(0.3))
    assert validation.held_out["prefill"] == plain.validation.held_out["prefill"]
    assert validation.gpu.measured_rows == {
        **plain.validation.gpu.measured_rows,
        "calibration c_1": 40,
    }
    assert validation.level == plain.validation.level


def test_few_residuals_never_narrow_the_levels_interval() -> None:
    """12 energy residuals (under 20): each bound the wider of the calibration's and the
    level's; 5 total-time residuals (no order statistics): the level's interval as it is."""
    estimator = Estimator.from_catalogues()
    request = EstimateRequest.model_validate(EXAMPLE_REQUEST)
    level = estimator.estimate(request).response.validation.held_out["energy"]
    # the calibration's lower bound far below the level's, its upper one well inside it
    low, high = math.log(level.lower_ratio) - 0.3, math.log(level.upper_ratio) / 2
    plain, moved = calibrated(
        estimator, quantiles("energy", 12, 3, low, high), quantiles("total", 5, 2, None, None)
    )
    energy = moved.energy
    assert energy.gpu_j_low == pytest.approx(energy.gpu_j * math.exp(low), rel=1e-12)
    assert energy.gpu_j_high == pytest.approx(energy.gpu_j * level.upper_ratio, rel=1e-12)
    held = moved.validation.held_out
    assert (held["energy"].level, held["energy"].rows) == ("calibration", 12)
    latency, before = moved.latency, plain.latency
    assert latency.total_s_high / latency.total_s == pytest.approx(
        before.total_s_high / before.total_s, rel=1e-12
    )
    assert held["total"] == plain.validation.held_out["total"]
    # from one model only, even 40 residuals do not stand alone: the same envelope
    _, one_model = calibrated(
        estimator, quantiles("energy", 40, 1, low, high), quantiles("total", 5, 2, None, None)
    )
    assert one_model.energy.gpu_j_high == pytest.approx(
        one_model.energy.gpu_j * level.upper_ratio, rel=1e-12
    )
