"""The pure calibration fit: shrinkage weights, screens, time-ordered holdout, payloads."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from service.pricing.calibration import (
    CalibrationPoint,
    Corrections,
    FitSettings,
    Flag,
    fit_calibration,
    fit_corrections,
    mape,
    screen,
)
from service.pricing.calibration.fit import holdout_size

T0 = datetime(2026, 11, 22, tzinfo=UTC)


def point(
    i: int, ratio: float, gpu: str = "H100-SXM5-80GB", family: str = "llama"
) -> CalibrationPoint:
    return CalibrationPoint(
        f"o{i:04d}", gpu, family, 100.0, 100.0 * ratio, T0 + timedelta(seconds=i)
    )


def test_three_points_barely_move_a_segment_in_a_pool_without_bias() -> None:
    """300 unbiased points on A100 keep the global correction near none (w = 303/313 of a
    mean of 3 ln 2 / 303); the three H100 points keep 3/13 of their distance to it."""
    points = [point(i, 1.0, gpu="A100-SXM4-80GB") for i in range(300)]
    points += [point(300 + i, 2.0) for i in range(3)]
    corrections = fit_corrections(points, shrinkage_k=10.0)
    mean_all = 3 * math.log(2) / 303
    global_delta = 303 / 313 * mean_all
    assert corrections.global_correction.log_factor == pytest.approx(global_delta)
    h100 = corrections.correction_for("H100-SXM5-80GB", "llama")
    assert h100.weight == pytest.approx(3 / 13)
    assert h100.log_factor == pytest.approx(global_delta + 3 / 13 * (math.log(2) - global_delta))
    assert 1.17 < h100.factor < 1.19  # not 2
    assert corrections.factor_for("A100-SXM4-80GB", "llama") == pytest.approx(
        math.exp(global_delta + 300 / 310 * (0 - global_delta))
    )
    # a segment never seen takes the global correction
    assert corrections.factor_for("L4", "qwen") == pytest.approx(math.exp(global_delta))


def test_no_points_no_correction() -> None:
    corrections = fit_corrections([], shrinkage_k=10.0)
    assert corrections.factor_for("H100-SXM5-80GB", "llama") == 1.0


def test_screen_range_and_robust_outliers() -> None:
    observed = [100.0 * (1 + 0.01 * (i % 3)) for i in range(10)] + [400.0, 3000.0, -1.0]
    predicted = [100.0] * 13
    screened = screen(observed, predicted, ["a"] * 13)
    assert screened.flags[:10] == [None] * 10
    assert screened.flags[10:] == [Flag.OUTLIER, Flag.OUT_OF_RANGE, Flag.OUT_OF_RANGE]


def test_a_small_segment_is_judged_against_the_pool_and_a_large_one_on_its_own() -> None:
    # segment b is biased x3 as a whole (5 points, judged on its own): not outliers; a lone
    # point of segment c at x3 is judged against the pool, where it is one
    observed = [100.0] * 20 + [300.0] * 5 + [300.0]
    groups = ["a"] * 20 + ["b"] * 5 + ["c"]
    flags = screen(observed, [100.0] * 26, groups).flags
    assert flags[:25] == [None] * 25
    assert flags[25] is Flag.OUTLIER


def test_holdout_is_the_newest_and_scored() -> None:
    # old observations say x2, the newest x1.8: scored on the newest only
    points = [point(i, 2.0) for i in range(8)] + [point(8 + i, 1.8) for i in range(2)]
    fit = fit_calibration(list(reversed(points)), FitSettings(shrinkage_k=1.0))
    assert (fit.fitted, fit.held_out) == (8, 2)
    factor = fit.corrections.factor_for("H100-SXM5-80GB", "llama")
    assert factor == pytest.approx(2 ** (1 - (1 / 9) ** 2))
    assert fit.holdout_mape_before == pytest.approx(0.8 / 1.8)
    assert fit.holdout_mape_after == pytest.approx(abs(factor - 1.8) / 1.8)
    assert holdout_size(4, 0.2) == 1 and holdout_size(1, 0.2) == 0 and holdout_size(10, 0) == 0


def test_mape_and_payload_roundtrip() -> None:
    assert mape([], []) is None
    assert mape([110.0, 90.0], [100.0, 100.0]) == pytest.approx(0.1)
    corrections = fit_corrections([point(i, 1.2) for i in range(5)], shrinkage_k=10.0)
    assert Corrections.from_payload(corrections.to_payload()) == corrections
