"""The pure calibration fit: family segments' shrinkage, screens, folds, payloads."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from service.pricing.calibration import (
    CalibrationPoint,
    Corrections,
    Flag,
    fit_corrections,
    mape,
    screen,
)
from service.pricing.calibration.fit import fold_count

T0 = datetime(2026, 11, 22, tzinfo=UTC)


def point(
    i: int, ratio: float, gpu: str = "H100-SXM5-80GB", family: str = "llama"
) -> CalibrationPoint:
    return CalibrationPoint(
        f"o{i:04d}", gpu, family, 100.0, 100.0 * ratio, T0 + timedelta(seconds=i)
    )


def test_family_segments_shrink_toward_none_and_never_cross_gpus() -> None:
    """300 unbiased points on A100 and three at x2 on H100: the H100 segment keeps w = 3/13
    of ln 2 (x1.17), the A100 one nothing; the pooled mean (3 ln 2 / 303) is reported with
    weight 0 and applies nowhere, so a segment never seen is not moved."""
    points = [point(i, 1.0, gpu="A100-SXM4-80GB") for i in range(300)]
    points += [point(300 + i, 2.0) for i in range(3)]
    corrections = fit_corrections(points, shrinkage_k=10.0)
    pooled = corrections.global_correction
    assert pooled.mean_log_ratio == pytest.approx(3 * math.log(2) / 303)
    assert (pooled.weight, pooled.log_factor) == (0.0, 0.0)
    h100 = corrections.segments[("H100-SXM5-80GB", "llama")]
    assert h100.weight == pytest.approx(3 / 13)
    assert h100.factor == pytest.approx(2 ** (3 / 13))
    assert 1.17 < h100.factor < 1.18  # not 2
    assert corrections.factor_for("A100-SXM4-80GB", "llama") == 1.0
    assert corrections.factor_for("L4", "qwen") == 1.0


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


def test_fold_count() -> None:
    """k = round(1 / holdout_fraction), at most one fold per observation; none below two."""
    assert fold_count(100, 0.2) == 5 and fold_count(100, 0.3) == 3 and fold_count(100, 0.5) == 2
    assert fold_count(3, 0.2) == 3 and fold_count(1, 0.2) == 0 and fold_count(100, 0.0) == 0


def test_mape_and_payload_roundtrip() -> None:
    assert mape([], []) is None
    assert mape([110.0, 90.0], [100.0, 100.0]) == pytest.approx(0.1)
    corrections = fit_corrections([point(i, 1.2) for i in range(5)], shrinkage_k=10.0)
    assert Corrections.from_payload(corrections.to_payload()) == corrections
