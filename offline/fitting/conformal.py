"""Split-conformal intervals per evidence level, with fallback and nested (grouped) coverage.

Scores are ln(measured / predicted) of held-out rows. For n scores and nominal quantiles
(q_lo, q_hi) the bounds are the k_lo-th and k_hi-th smallest scores (1-based) with
k_lo = floor((n + 1) q_lo) and k_hi = ceil((n + 1) q_hi): the finite-sample split-conformal
order statistics, so that a new exchangeable score falls inside with probability at least
q_hi - q_lo. A level with fewer than MIN_ROWS rows or MIN_GROUPS groups takes the quantiles of
the next level in its fallback chain (wider levels first, then narrower).

Rows of one group (a family, a GPU) are not exchangeable with another group's: bounds at the
nominal quantiles cover a group never seen at another rate than nominal. So the order
statistics' quantiles are chosen by leave-one-group-out within the rows they are fitted on
(`group_quantile`): the symmetric pair, among SCORE_QUANTILES, whose bounds fitted without
each group cover that group's rows (pooled) closest to the nominal share. With fewer than
three groups (no pair of groups to learn the spread from) a level takes the pair
`few_group_quantiles` chose for fits on that many groups of its quantity: the one whose bounds,
fitted on one group (or two) of a cell with more groups, cover another group of the same cell
closest to the nominal share. Both are inner folds: in the nested check, without the row's
group. Two rules on top, neither learnt from folds: the engine level is fitted on its scores
and their mirror images (`fitted_scores`), and no level states an interval narrower than the
family level's (`fit_level`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np

from offline.fitting.held_out_rows import HeldOutRow
from service.catalog.intervals import LevelInterval
from service.pricing.evidence import LEVELS

MIN_ROWS = 20  # at 0.1 / 0.9 each bound is then at least the 2nd score from its end
MIN_GROUPS = 1  # one vendor is all the data has; nested coverage still leaves it out
MIN_GROUPS_TO_CHOOSE = 3
MIRRORED_LEVELS = frozenset({"engine"})
"""Levels whose bounds are fitted on each score and its mirror image (`fitted_scores`)."""
SCORE_QUANTILES = (0.01, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25)
"""Lower order-statistic quantiles `group_quantile` chooses among (the upper is 1 - it)."""


def conformal_bounds(
    scores: Sequence[float], lower_q: float, upper_q: float
) -> tuple[float, float] | None:
    """The split-conformal bounds of `scores` (see the module doc); None when n is too small
    for either order statistic to exist."""
    n = len(scores)
    k_lo, k_hi = math.floor((n + 1) * lower_q), math.ceil((n + 1) * upper_q)
    if k_lo < 1 or k_hi > n:
        return None
    ordered = sorted(scores)
    return ordered[k_lo - 1], ordered[k_hi - 1]


def inside_bounds(score: float, bounds: tuple[float, float]) -> bool:
    """Whether a score lies inside `bounds` widened to bracket the estimate (score 0)."""
    return min(bounds[0], 0.0) <= score <= max(bounds[1], 0.0)


def mirror_centres(rows: Sequence[HeldOutRow]) -> dict[str, float]:
    """Per quantity, the median score of the `family` level's rows: how the profiles err on
    the engines they were fitted on (`fitted_scores` mirrors about it)."""
    by_quantity: dict[str, list[float]] = {}
    for r in rows:
        if r.level == "family":
            by_quantity.setdefault(r.quantity, []).append(r.log_ratio)
    return {q: float(np.median(v)) for q, v in by_quantity.items()}


def fitted_scores(rows: Sequence[HeldOutRow], centres: Mapping[str, float]) -> list[float]:
    """The scores bounds are fitted on: each row's, and at a MIRRORED_LEVELS level its mirror
    image about its quantity's centre (`mirror_centres`; 0 without one) too. An engine held
    out is priced with another engine's profile, and which of the two is the profile is an
    accident of what was measured (vllm-v0 priced as vllm-v1 errs the other way from vllm-v1
    priced as vllm-v0): a version never measured may run on either side of the profile it is
    priced with, about where that profile errs on its own engine."""
    scores = [r.log_ratio for r in rows]
    mirrored = [r for r in rows if r.level in MIRRORED_LEVELS]
    return scores + [2.0 * centres.get(r.quantity, 0.0) - r.log_ratio for r in mirrored]


def group_coverage(
    rows: Sequence[HeldOutRow], lower_q: float, centres: Mapping[str, float] | None = None
) -> float | None:
    """The share of `rows` inside the bounds at (lower_q, 1 - lower_q) fitted on the other
    groups' rows, each group left out in turn; None when some group's bounds do not exist.
    `centres`: `fitted_scores`'s (none: 0)."""
    inside = 0
    for group in {r.group for r in rows}:
        others = fitted_scores([r for r in rows if r.group != group], centres or {})
        bounds = conformal_bounds(others, lower_q, 1.0 - lower_q)
        if bounds is None:
            return None
        inside += sum(inside_bounds(r.log_ratio, bounds) for r in rows if r.group == group)
    return inside / len(rows)


def group_quantile(
    rows: Sequence[HeldOutRow],
    lower_q: float,
    upper_q: float,
    centres: Mapping[str, float] | None = None,
) -> float:
    """The lower order-statistic quantile whose leave-one-group-out coverage of `rows` is
    closest to the nominal upper_q - lower_q (ties: nearest the nominal `lower_q`); the
    nominal `lower_q` itself with fewer than MIN_GROUPS_TO_CHOOSE groups (module doc)."""
    if len({r.group for r in rows}) < MIN_GROUPS_TO_CHOOSE:
        return lower_q
    nominal = upper_q - lower_q
    scored = [(group_coverage(rows, q, centres), q) for q in SCORE_QUANTILES]
    ranked = [(abs(c - nominal), abs(q - lower_q), q) for c, q in scored if c is not None]
    return min(ranked)[2] if ranked else lower_q


def few_group_quantiles(
    rows: Sequence[HeldOutRow], lower_q: float, upper_q: float
) -> dict[tuple[str, int], float]:
    """For a fit on G groups, G < MIN_GROUPS_TO_CHOOSE, of quantity Q: the lower
    order-statistic quantile among SCORE_QUANTILES whose bounds fitted on G groups of a cell
    (level, Q) cover another group of that cell closest to the nominal share (ties: nearest
    `lower_q`), keyed (Q, G); keyed ("", G) the same over the cells of every quantity, for a
    quantity with no cell of more than G groups (`lower_q` when no quantity has one).

    Each group of a cell is left out in turn, bounds fitted on each set of G other groups with
    MIN_ROWS rows or more (rows of a fit without bounds at a quantile count as outside); a
    cell's coverage pools its folds' rows, cells weigh equally."""
    cells: dict[tuple[str, str], dict[str, list[HeldOutRow]]] = {}
    for r in rows:
        cells.setdefault((r.level, r.quantity), {}).setdefault(r.group, []).append(r)
    nominal = upper_q - lower_q
    centres = mirror_centres(rows)
    chosen: dict[tuple[str, int], float] = {}
    for size in range(1, MIN_GROUPS_TO_CHOOSE):
        shares: dict[str, dict[float, list[float]]] = {}
        for (_, quantity), groups in cells.items():
            if len(groups) <= size:
                continue
            for q in SCORE_QUANTILES:
                share = _cell_coverage(groups, size, q, centres)
                if share is not None:
                    for key in (quantity, ""):
                        shares.setdefault(key, {}).setdefault(q, []).append(share)
        for key, by_q in shares.items():
            ranked = [
                (abs(float(np.mean(v)) - nominal), abs(q - lower_q), q) for q, v in by_q.items()
            ]
            chosen[(key, size)] = min(ranked)[2]
    return chosen


def _cell_coverage(
    groups: Mapping[str, list[HeldOutRow]], size: int, q: float, centres: Mapping[str, float]
) -> float | None:
    """The share of a cell's rows inside bounds at (q, 1 - q) fitted on `size` other groups
    (`few_group_quantiles`); None when no such fit has MIN_ROWS rows."""
    inside = total = 0
    for left_out, members in groups.items():
        others = [g for g in groups if g != left_out]
        for fitted_on in combinations(others, size):
            pooled = [r for g in fitted_on for r in groups[g]]
            if len(pooled) < MIN_ROWS:
                continue
            bounds = conformal_bounds(fitted_scores(pooled, centres), q, 1.0 - q)
            total += len(members)
            if bounds is not None:
                inside += sum(inside_bounds(r.log_ratio, bounds) for r in members)
    return inside / total if total else None


def fallback_chain(level: str) -> list[str]:
    """`level`, then the wider levels narrowest first, then the narrower ones widest first; a
    custom architecture is a family never fitted on, so `custom` falls back to `family`."""
    if level == "custom":
        return ["custom", *[x for x in fallback_chain("family") if x != "custom"]]
    at = LEVELS.index(level)
    return [level, *LEVELS[at + 1 :], *reversed(LEVELS[:at])]


def fit_level(
    rows: Sequence[HeldOutRow],
    level: str,
    quantity: str,
    lower_q: float,
    upper_q: float,
    few: Mapping[tuple[str, int], float] | None = None,
) -> LevelInterval | None:
    """The quantiles stated for `level` and `quantity`, from the first level of its chain with
    enough rows and groups (the service's own LevelInterval); None when no level has. `few`:
    `few_group_quantiles` of `rows` (computed when not given)."""
    if few is None:
        few = few_group_quantiles(rows, lower_q, upper_q)
    centres, nominal = mirror_centres(rows), (lower_q, upper_q)
    for candidate in fallback_chain(level):
        chosen = [r for r in rows if r.level == candidate and r.quantity == quantity]
        groups = len({r.group for r in chosen})
        if len(chosen) < MIN_ROWS or groups < MIN_GROUPS:
            continue
        scores = fitted_scores(chosen, centres)
        if groups >= MIN_GROUPS_TO_CHOOSE:
            score_q = group_quantile(chosen, lower_q, upper_q, centres)
            bounds = conformal_bounds(scores, score_q, 1.0 - score_q)
        else:
            # the few-group quantile, or the nearest one above it these rows have bounds at
            wanted = few.get((quantity, groups), few.get(("", groups), lower_q))
            tries = [q for q in SCORE_QUANTILES if q >= wanted] or [lower_q]
            found = [(q, conformal_bounds(scores, q, 1.0 - q)) for q in tries]
            score_q, bounds = next(((q, b) for q, b in found if b is not None), (lower_q, None))
        if bounds is None:
            continue
        relative = [abs(r.predicted - r.measured) / r.measured for r in chosen]
        low, high = math.exp(bounds[0]), math.exp(bounds[1])
        # Never narrower than a case fitted on in every respect: a level of one or two groups
        # cannot tell how far a new group may sit from them, the family level (many) can.
        floor = None if level == "family" else fit_level(rows, "family", quantity, *nominal, few)
        if floor is not None:
            low, high = min(low, floor.lower_ratio), max(high, floor.upper_ratio)
        mape = 100.0 * float(np.mean(relative))
        return LevelInterval(level, candidate, low, high, len(chosen), groups, mape, score_q)
    return None


def width_ratio(interval: LevelInterval) -> float:
    """high / low of the interval a quote states (ratios widened to bracket the estimate)."""
    return max(interval.upper_ratio, 1.0) / min(interval.lower_ratio, 1.0)


def nested_inside(
    rows: Sequence[HeldOutRow], level: str, quantity: str, lower_q: float, upper_q: float
) -> list[tuple[HeldOutRow, bool, float]]:
    """Each row of `level` and `quantity`, whether its measured value lies inside the interval
    stated with quantiles fitted without its group (all rows of the same measurements left out,
    at every level): the coverage a new group would see; and that interval's `width_ratio`
    (infinite where no interval could be fitted)."""
    own = [r for r in rows if r.level == level and r.quantity == quantity]
    out: list[tuple[HeldOutRow, bool, float]] = []
    for group in sorted({r.group for r in own}):
        members = [r for r in own if r.group == group]
        refs = {r.row_ref for r in members}
        others = [r for r in rows if r.row_ref not in refs]
        few = few_group_quantiles(others, lower_q, upper_q)
        fitted = fit_level(others, level, quantity, lower_q, upper_q, few)
        for r in members:
            if fitted is None:
                out.append((r, False, math.inf))
                continue
            bounds = (math.log(fitted.lower_ratio), math.log(fitted.upper_ratio))
            out.append((r, inside_bounds(r.log_ratio, bounds), width_ratio(fitted)))
    return out
