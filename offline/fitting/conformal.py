"""Split-conformal intervals per evidence level, with fallback and nested (grouped) coverage.

Scores are ln(measured / predicted) of held-out rows. For n scores and nominal quantiles
(q_lo, q_hi) the bounds are the k_lo-th and k_hi-th smallest scores (1-based) with
k_lo = floor((n + 1) q_lo) and k_hi = ceil((n + 1) q_hi): the finite-sample split-conformal
order statistics, so that a new exchangeable score falls inside with probability at least
q_hi - q_lo. A level with fewer than MIN_ROWS rows or MIN_GROUPS groups takes the quantiles of
the next level in its fallback chain (wider levels first, then narrower).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from offline.fitting.held_out_rows import HeldOutRow
from service.catalog.intervals import LevelInterval
from service.pricing.evidence import LEVELS

MIN_ROWS = 30
MIN_GROUPS = 1  # one vendor is all the data has; nested coverage still leaves it out


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
        bounds = conformal_bounds([r.log_ratio for r in chosen], lower_q, upper_q)
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
            low = r.predicted * min(fitted.lower_ratio, 1.0)
            high = r.predicted * max(fitted.upper_ratio, 1.0)
            out.append((r, low <= r.measured <= high))
    return out
