"""Split-conformal bounds, the fallback between evidence levels, and nested coverage, against
order statistics and shares worked out by hand."""

from __future__ import annotations

import math

import pytest

from offline.fitting.conformal import (
    MIN_ROWS,
    conformal_bounds,
    fallback_chain,
    fit_level,
    group_coverage,
    group_quantile,
    nested_inside,
)
from offline.fitting.held_out_rows import HeldOutRow


def row(level: str, group: str, log_ratio: float, ref: str) -> HeldOutRow:
    """A tpot row whose ln(measured / predicted) is `log_ratio` (predicted 1 s)."""
    case = ("H100-SXM5-80GB", "vllm-v1", "bf16", group)
    return HeldOutRow(level, group, "tpot", "test", ref, math.exp(log_ratio), 1.0, *case)


def test_bounds_are_the_finite_sample_order_statistics() -> None:
    # n = 19 scores 1..19 (shuffled): k_lo = floor(20 x 0.1) = 2, k_hi = ceil(20 x 0.9) = 18.
    scores = [7, 3, 19, 1, 12, 5, 18, 2, 9, 14, 4, 16, 6, 11, 8, 17, 10, 13, 15]
    assert conformal_bounds([float(s) for s in scores], 0.1, 0.9) == (2.0, 18.0)
    # n = 10: k_lo = floor(1.1) = 1 (the smallest), k_hi = ceil(9.9) = 10 (the largest).
    assert conformal_bounds([float(s) for s in range(10)], 0.1, 0.9) == (0.0, 9.0)


def test_too_few_scores_have_no_bounds() -> None:
    # n = 8: k_lo = floor(0.9) = 0, no such order statistic.
    assert conformal_bounds([0.0] * 8, 0.1, 0.9) is None


def test_fallback_goes_wider_first_then_narrower() -> None:
    assert fallback_chain("engine") == ["engine", "gpu", "vendor", "precision", "custom", "family"]
    assert fallback_chain("vendor") == ["vendor", "gpu", "engine", "precision", "custom", "family"]
    assert fallback_chain("custom") == ["custom", "family", "precision", "engine", "gpu", "vendor"]


def test_a_small_level_takes_the_next_wider_levels_quantiles() -> None:
    # 5 engine rows (too few), 40 gpu rows in two groups with scores -0.39..0.39 step 0.02.
    rows = [row("engine", "sglang", 1.0, f"e{i}") for i in range(5)]
    scores = [round(-0.39 + 0.02 * i, 2) for i in range(40)]
    rows += [row("gpu", f"g{i % 2}", s, f"g{i}") for i, s in enumerate(scores)]
    fitted = fit_level(rows, "engine", "tpot", 0.1, 0.9)
    assert fitted is not None
    # n = 40: k_lo = floor(4.1) = 4 -> -0.33; k_hi = ceil(36.9) = 37 -> 0.33.
    assert fitted.fitted_level == "gpu"
    assert (fitted.rows, fitted.groups) == (40, 2)
    assert fitted.lower_ratio == pytest.approx(math.exp(-0.33))
    assert fitted.upper_ratio == pytest.approx(math.exp(0.33))
    assert len(rows) - 5 >= MIN_ROWS


def test_nested_coverage_leaves_the_rows_own_group_out() -> None:
    # Group a: 30 rows at score 0; group b: 30 rows at 0.5; group c: 30 rows at 0.
    # Without b, the quantiles of a and c are (0, 0): b's rows (0.5) fall outside.
    # Without a, the quantiles of b and c span 0..0.5: a's rows (0) fall inside; same for c.
    rows = [row("family", "a", 0.0, f"a{i}") for i in range(30)]
    rows += [row("family", "b", 0.5, f"b{i}") for i in range(30)]
    rows += [row("family", "c", 0.0, f"c{i}") for i in range(30)]
    inside = nested_inside(rows, "family", "tpot", 0.1, 0.9)
    by_group = {g: [ok for r, ok in inside if r.group == g] for g in "abc"}
    assert by_group == {"a": [True] * 30, "b": [False] * 30, "c": [True] * 30}


def test_the_order_statistics_cover_a_group_left_out_at_the_nominal_rate() -> None:
    # Three groups, each with scores -0.20, -0.19, ..., 0.19 (40 rows). Leaving one out, the
    # other 80 scores hold each value twice: the i-th smallest is -0.20 + (ceil(i / 2) - 1) / 100.
    # q = 0.1: k = floor(81 x 0.1) = 8 -> -0.17, ceil(81 x 0.9) = 73 -> 0.16: 34 of 40 inside.
    # q = 0.125: k = 10 -> -0.16, 71 -> 0.15: 32 of 40 inside, the nominal 80 %.
    # q = 0.075: 6 -> -0.18, 75 -> 0.17: 36 of 40; q = 0.15: 12 -> -0.15, 69 -> 0.14: 30 of 40.
    rows = [row("family", g, (j - 20) / 100, f"{g}{j}") for g in "abc" for j in range(40)]
    assert group_coverage(rows, 0.1) == pytest.approx(34 / 40)
    assert group_coverage(rows, 0.075) == pytest.approx(36 / 40)
    assert group_coverage(rows, 0.15) == pytest.approx(30 / 40)
    assert group_quantile(rows, 0.1, 0.9) == 0.125
    # Bounds on all 120 scores (each value thrice) at 0.125: k = floor(121 x 0.125) = 15 ->
    # -0.20 + (5 - 1) / 100 = -0.16; ceil(121 x 0.875) = 106 -> -0.20 + 35 / 100 = 0.15.
    fitted = fit_level(rows, "family", "tpot", 0.1, 0.9)
    assert fitted is not None and fitted.score_quantile == 0.125
    assert fitted.lower_ratio == pytest.approx(math.exp(-0.16))
    assert fitted.upper_ratio == pytest.approx(math.exp(0.15))
    # With two groups there is no pair to learn the spread from: the nominal quantiles.
    assert group_quantile([r for r in rows if r.group != "c"], 0.1, 0.9) == 0.1
