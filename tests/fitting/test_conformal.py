"""Split-conformal bounds, the fallback between evidence levels, and nested coverage, against
order statistics and shares worked out by hand."""

from __future__ import annotations

import math

import pytest

from offline.fitting.conformal import fallback_chain, fit_level, nested_inside, width_ratio
from offline.fitting.conformal_rules import (
    MIN_ROWS,
    Rule,
    borrowing_rules,
    few_group_rules,
    group_rule,
)
from offline.fitting.held_out_rows import HeldOutRow
from service.catalog.intervals import conformal_bounds


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
    by_group = {g: [ok for r, ok, _ in inside if r.group == g] for g in "abc"}
    assert by_group == {"a": [True] * 30, "b": [False] * 30, "c": [True] * 30}


def test_the_order_statistics_cover_a_group_left_out_at_the_nominal_rate() -> None:
    # Three groups, each with scores -0.20, -0.19, ..., 0.19 (40 rows). Leaving one out, the
    # other 80 scores hold each value twice: the i-th smallest is -0.20 + (ceil(i / 2) - 1) / 100.
    # q = 0.1: k = floor(81 x 0.1) = 8 -> -0.17, ceil(81 x 0.9) = 73 -> 0.16: 34 of 40 inside.
    # q = 0.125: k = 10 -> -0.16, 71 -> 0.15: 32 of 40 inside, the nominal 80 %.
    # q = 0.075: 6 -> -0.18, 75 -> 0.17: 36 of 40; q = 0.15: 12 -> -0.15, 69 -> 0.14: 30 of 40.
    # Mirrored about the family median (-0.005) the scores gain no values outside -0.20..0.19
    # that q = 0.125 reaches, and unmirrored comes first among equals.
    rows = [row("family", g, (j - 20) / 100, f"{g}{j}") for g in "abc" for j in range(40)]
    assert group_rule(rows, "family", 0.1, 0.9, rows) == Rule(0.125)
    # Bounds on all 120 scores (each value thrice) at 0.125: k = floor(121 x 0.125) = 15 ->
    # -0.20 + (5 - 1) / 100 = -0.16; ceil(121 x 0.875) = 106 -> -0.20 + 35 / 100 = 0.15.
    fitted = fit_level(rows, "family", "tpot", 0.1, 0.9)
    assert fitted is not None and fitted.score_quantile == 0.125
    assert fitted.lower_ratio == pytest.approx(math.exp(-0.16))
    assert fitted.upper_ratio == pytest.approx(math.exp(0.15))
    # With two groups there is no pair to learn the spread from: the nominal quantiles.
    assert group_rule([r for r in rows if r.group != "c"], "family", 0.1, 0.9) == Rule(0.1)


def two_shifted_groups() -> list[HeldOutRow]:
    """Group a: scores -0.10, -0.09, ..., 0.09; group b: the same shifted up by 0.02 (20 each;
    shared values computed alike, so they compare equal)."""
    rows = [row("family", "a", (j - 10) / 100, f"a{j}") for j in range(20)]
    return rows + [row("family", "b", (j - 8) / 100, f"b{j}") for j in range(20)]


def test_a_one_group_fits_quantile_is_learnt_on_the_cells_with_more_groups() -> None:
    # n = 20 per fit: q = 0.01, 0.025 have no order statistic (floor(21 q) = 0): 0 inside.
    # Fitted on a (i-th smallest -0.10 + (i - 1) / 100), b's rows -0.08..0.11 inside:
    #   q 0.05, 0.075: k 1, 20 -> (-0.10, 0.09): 18 | q 0.1, 0.125: k 2, 19 -> (-0.09, 0.08): 17
    #   q 0.15: k 3, 18 -> (-0.08, 0.07): 16 | 0.2: 4, 17 -> (-0.07, 0.06): 14 | 0.25: 12
    # Fitted on b (i-th smallest -0.08 + (i - 1) / 100), a's rows -0.10..0.09 inside:
    #   0.05, 0.075: (-0.08, 0.11): 18 | 0.1, 0.125: (-0.07, 0.10): 17 | 0.15: (-0.06, 0.09):
    #   16 | 0.2: (-0.05, 0.08): 14 | 0.25: 12
    # Pooled: 36/40 at 0.05, 34/40 at 0.1, 32/40 = 80 % (the nominal) at 0.15.
    # Floored, the bounds hold the family's own fitted on the other group (two groups: the
    # nominal 0.1, 17 inside each way): never under 34/40. Mirrored about the other group's
    # median, each group's scores are its own set again: the same shares, listed later.
    rows = two_shifted_groups()
    few = few_group_rules(rows, 0.1, 0.9)
    assert few[("tpot", 1)] == Rule(0.15)  # learnt on tpot's own cells
    # Learnt on the level's cells or every quantity's (other phases, where one group's
    # residuals may hold another's for reasons of their own), a rule only widens: the
    # candidates stop at the nominal 0.1, whose 34/40 is the nearest to 32/40.
    assert few[("@family", 1)].lower_q == few[("", 1)].lower_q == 0.1
    assert ("tpot", 2) not in few  # no cell has three groups: fit_level takes the nominal


def test_a_two_group_level_takes_the_few_group_quantile() -> None:
    # The 40 scores at q = 0.15: k_lo = floor(41 x 0.15) = 6, k_hi = ceil(41 x 0.85) = 35.
    # Sorted: -0.10, -0.09, -0.08, -0.08, -0.07, -0.07 (6th) ... 0.08, 0.08 (35th, 36th),
    # 0.09, 0.09, 0.10, 0.11.
    fitted = fit_level(two_shifted_groups(), "family", "tpot", 0.1, 0.9, {("tpot", 2): Rule(0.15)})
    assert fitted is not None and fitted.score_quantile == 0.15
    # The rule learnt on the level's own cells comes before the quantity's.
    few = {("@family", 2): Rule(0.15), ("tpot", 2): Rule(0.05)}
    assert fit_level(two_shifted_groups(), "family", "tpot", 0.1, 0.9, few) == fitted
    assert fitted.lower_ratio == pytest.approx(math.exp(-0.07))
    assert fitted.upper_ratio == pytest.approx(math.exp(0.08))
    assert width_ratio(fitted) == pytest.approx(math.exp(0.15))
    # A quantile with no order statistic on these rows moves to the next one that has: 20 rows
    # of group a have none at 0.01 or 0.025 (floor(21 q) = 0), the 1st and 20th at 0.05.
    only_a = [r for r in two_shifted_groups() if r.group == "a"]
    fitted = fit_level(only_a, "family", "tpot", 0.1, 0.9, {("tpot", 1): Rule(0.01)})
    assert fitted is not None and fitted.score_quantile == 0.05
    assert fitted.lower_ratio == pytest.approx(math.exp(-0.10))
    assert fitted.upper_ratio == pytest.approx(math.exp(0.09))


def test_a_biased_intervals_width_counts_its_widening_to_the_estimate() -> None:
    # Ratios 1.2 .. 1.5 widen to 1.0 .. 1.5: high / low 1.5.
    fitted = fit_level(
        [row("gpu", "h", math.log(1.2 + 0.3 * i / 39), f"h{i}") for i in range(40)],
        "gpu",
        "tpot",
        0.1,
        0.9,
        {("tpot", 1): Rule(0.025)},
    )
    assert fitted is not None
    # n = 40, q = 0.025: k_lo = floor(1.025) = 1, k_hi = ceil(39.975) = 40: 1.2 and 1.5.
    assert (fitted.lower_ratio, fitted.upper_ratio) == pytest.approx((1.2, 1.5))
    assert width_ratio(fitted) == pytest.approx(1.5)


def test_the_engine_level_is_fitted_on_its_scores_mirrored_about_the_family_median() -> None:
    # Family tpot rows all at 0.10: the centre. Engine rows 0.30..0.49 mirror to
    # 0.20 - s = -0.10..-0.29. On the 40 scores at q = 0.1: k_lo = floor(4.1) = 4 -> the mirror
    # of the 4th largest, 0.20 - 0.46 = -0.26; k_hi = ceil(36.9) = 37 -> 0.46. The family's own
    # bounds (0.10, 0.10) lie inside: the floor changes nothing.
    rows = [row("family", "f", 0.10, f"f{j}") for j in range(20)]
    rows += [row("engine", "sglang", (30 + j) / 100, f"e{j}") for j in range(20)]
    fitted = fit_level(rows, "engine", "tpot", 0.1, 0.9, {("tpot", 1): Rule(0.1, True, True)})
    assert fitted is not None and fitted.fitted_level == "engine"
    assert fitted.lower_ratio == pytest.approx(math.exp(-0.26))
    assert fitted.upper_ratio == pytest.approx(math.exp(0.46))


def test_no_level_is_narrower_than_the_family_level() -> None:
    # GPU rows all at 0: bounds (0, 0). Family rows -0.39..0.39 step 0.02 (n = 40): at
    # q = 0.1 the 4th and 37th smallest, -0.33 and 0.33: the GPU level states those.
    rows = [row("gpu", "h200", 0.0, f"g{j}") for j in range(20)]
    rows += [row("family", "f", round(-0.39 + 0.02 * i, 2), f"f{i}") for i in range(40)]
    fitted = fit_level(rows, "gpu", "tpot", 0.1, 0.9, {("tpot", 1): Rule(0.1, floored=True)})
    assert fitted is not None and fitted.fitted_level == "gpu" and fitted.floored
    assert (fitted.rows, fitted.groups) == (20, 1)
    assert fitted.lower_ratio == pytest.approx(math.exp(-0.33))
    assert fitted.upper_ratio == pytest.approx(math.exp(0.33))
    # A rule that is not floored states the GPU rows' own (0, 0).
    fitted = fit_level(rows, "gpu", "tpot", 0.1, 0.9, {("tpot", 1): Rule(0.1)})
    assert fitted is not None and (fitted.lower_ratio, fitted.upper_ratio) == (1.0, 1.0)


def test_the_family_floor_is_kept_unless_the_folds_show_it_over_covers() -> None:
    # Engine groups a, b, c with scores -0.20..0.19 (40 each): unfloored, q = 0.125 holds a
    # group left out at 32/40 = 80 % (the test above). A wide family level, -0.39..0.39 step
    # 0.02 (n = 40, its rule 0.1: the 4th and 37th smallest, -0.33 and 0.33, refitted without
    # no family row), floors every fold at (-0.33, 0.33): 40/40 inside, so the floor is dropped.
    engine = [row("engine", g, (j - 20) / 100, f"{g}{j}") for g in "abc" for j in range(40)]
    wide = [row("family", "f", round(-0.39 + 0.02 * i, 2), f"f{i}") for i in range(40)]
    assert group_rule(engine, "engine", 0.1, 0.9, engine + wide, Rule(0.1)) == Rule(0.125)
    # A family level at 0 (bounds (0, 0)) lies inside every fold's bounds: floored or not
    # cover alike, and the floor (listed first) is kept.
    narrow = [row("family", "f", 0.0, f"f{i}") for i in range(40)]
    chosen = group_rule(engine, "engine", 0.1, 0.9, engine + narrow, Rule(0.1))
    assert chosen == Rule(0.125, floored=True)


def test_a_level_without_rows_takes_a_narrower_levels_under_the_borrowing_rule() -> None:
    # Family tpot rows -0.10..0.09 (20, step 0.01); GPU rows twice as spread, -0.20..0.18
    # (step 0.02). Bounds fitted on the family rows hold the GPU rows: at q = 0.05 (k 1, 20:
    # -0.10, 0.09) the 10 from -0.10 to 0.08, 50 %: every quantile holds at most half, so
    # the widest with bounds on 20 rows, 0.05, is the rule (unmirrored first: the family
    # median -0.005 mirrors -0.10..0.09 onto -0.09..0.10, the same count).
    family = [row("family", "f", (j - 10) / 100, f"f{j}") for j in range(20)]
    gpu = [row("gpu", "h", (j - 10) / 50, f"h{j}") for j in range(20)]
    assert borrowing_rules(family + gpu, 0.1, 0.9)[("tpot", 0)] == Rule(0.05)
    # The vendor level, with no rows, takes the GPU level's rows under it, and never states
    # less than the GPU level itself: at 0.05 (n = 20: the 1st and 20th) -0.20 and 0.18.
    fitted = fit_level(family + gpu, "vendor", "tpot", 0.1, 0.9, {("tpot", 0): Rule(0.05)})
    assert fitted is not None and fitted.fitted_level == "gpu"
    assert fitted.lower_ratio == pytest.approx(math.exp(-0.20))
    assert fitted.upper_ratio == pytest.approx(math.exp(0.18))
