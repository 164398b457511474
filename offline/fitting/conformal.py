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
each group cover that group's rows (pooled) closest to the nominal share; with fewer than
three groups (no pair of groups to learn the spread from) the nominal pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from offline.fitting.held_out_rows import HeldOutRow
from service.catalog.intervals import LevelInterval
from service.pricing.evidence import LEVELS

MIN_ROWS = 20  # at 0.1 / 0.9 each bound is then at least the 2nd score from its end
MIN_GROUPS = 1  # one vendor is all the data has; nested coverage still leaves it out
MIN_GROUPS_TO_CHOOSE = 3
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


def group_coverage(rows: Sequence[HeldOutRow], lower_q: float) -> float | None:
    """The share of `rows` inside the bounds at (lower_q, 1 - lower_q) fitted on the other
    groups' rows, each group left out in turn; None when some group's bounds do not exist."""
    inside = 0
    for group in {r.group for r in rows}:
        others = [r.log_ratio for r in rows if r.group != group]
        bounds = conformal_bounds(others, lower_q, 1.0 - lower_q)
        if bounds is None:
            return None
        inside += sum(inside_bounds(r.log_ratio, bounds) for r in rows if r.group == group)
    return inside / len(rows)


def group_quantile(rows: Sequence[HeldOutRow], lower_q: float, upper_q: float) -> float:
    """The lower order-statistic quantile whose leave-one-group-out coverage of `rows` is
    closest to the nominal upper_q - lower_q (ties: nearest the nominal `lower_q`); the
    nominal `lower_q` itself with fewer than MIN_GROUPS_TO_CHOOSE groups (module doc)."""
    if len({r.group for r in rows}) < MIN_GROUPS_TO_CHOOSE:
        return lower_q
    nominal = upper_q - lower_q
    scored = [(group_coverage(rows, q), q) for q in SCORE_QUANTILES]
    ranked = [(abs(c - nominal), abs(q - lower_q), q) for c, q in scored if c is not None]
    return min(ranked)[2] if ranked else lower_q


def fallback_chain(level: str) -> list[str]:
    """`level`, then the wider levels narrowest first, then the narrower ones widest first; a
    custom architecture is a family never fitted on, so `custom` falls back to `family`."""
    if level == "custom":
        return ["custom", *[x for x in fallback_chain("family") if x != "custom"]]
    at = LEVELS.index(level)
    return [level, *LEVELS[at + 1 :], *reversed(LEVELS[:at])]


def fit_level(
    rows: Sequence[HeldOutRow], level: str, quantity: str, lower_q: float, upper_q: float
) -> LevelInterval | None:
    """The quantiles stated for `level` and `quantity`, from the first level of its chain with
    enough rows and groups (the service's own LevelInterval); None when no level has."""
    for candidate in fallback_chain(level):
        chosen = [r for r in rows if r.level == candidate and r.quantity == quantity]
        groups = len({r.group for r in chosen})
        if len(chosen) < MIN_ROWS or groups < MIN_GROUPS:
            continue
        score_q = group_quantile(chosen, lower_q, upper_q)
        bounds = conformal_bounds([r.log_ratio for r in chosen], score_q, 1.0 - score_q)
        if bounds is None:
            continue
        relative = [abs(r.predicted - r.measured) / r.measured for r in chosen]
        return LevelInterval(
            level,
            candidate,
            math.exp(bounds[0]),
            math.exp(bounds[1]),
            len(chosen),
            groups,
            100.0 * float(np.mean(relative)),
            score_q,
        )
    return None


def nested_inside(
    rows: Sequence[HeldOutRow], level: str, quantity: str, lower_q: float, upper_q: float
) -> list[tuple[HeldOutRow, bool]]:
    """Each row of `level` and `quantity`, and whether its measured value lies inside the
    interval stated with quantiles fitted without its group (all rows of the same measurements
    left out, at every level): the coverage a new group would see."""
    own = [r for r in rows if r.level == level and r.quantity == quantity]
    out: list[tuple[HeldOutRow, bool]] = []
    for group in sorted({r.group for r in own}):
        members = [r for r in own if r.group == group]
        refs = {r.row_ref for r in members}
        others = [r for r in rows if r.row_ref not in refs]
        fitted = fit_level(others, level, quantity, lower_q, upper_q)
        for r in members:
            if fitted is None:
                out.append((r, False))
                continue
            bounds = (math.log(fitted.lower_ratio), math.log(fitted.upper_ratio))
            out.append((r, inside_bounds(r.log_ratio, bounds)))
    return out
