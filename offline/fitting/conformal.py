"""Split-conformal intervals per evidence level, with fallback and nested (grouped) coverage.

Scores are ln(measured / predicted) of held-out rows. For n scores and nominal quantiles
(q_lo, q_hi) the bounds are the k_lo-th and k_hi-th smallest scores (1-based) with
k_lo = floor((n + 1) q_lo) and k_hi = ceil((n + 1) q_hi): the finite-sample split-conformal
order statistics, so that a new exchangeable score falls inside with probability at least
q_hi - q_lo. A level with fewer than MIN_ROWS rows or MIN_GROUPS groups takes the quantiles of
the next level in its fallback chain (wider levels first, then narrower).

Rows of one group (a family, a GPU, an engine version) are not exchangeable with another
group's: bounds at the nominal quantiles cover a group never seen at another rate than nominal.
So each level's bounds are fitted under a `Rule` (the quantile among SCORE_QUANTILES, whether
the scores are mirrored about the family median, whether the bounds hold the family level's)
chosen by inner folds: with three groups or more by leaving each group out (`group_rule`); with
one or two, on the cells with more groups, fitted on that many and covering another
(`few_group_rules`: the level's own cells first, then the quantity's, then all; learnt on
other quantities' cells, never above the nominal quantile); with no rows of
its own, taking a narrower level's, on pairs of levels (`borrowing_rules`). In each, the rule
whose held-out share is closest to the nominal. In the nested check all of it is chosen without
the row's group.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from offline.fitting.conformal_rules import (
    MIN_GROUPS,
    MIN_GROUPS_TO_CHOOSE,
    MIN_ROWS,
    SCORE_QUANTILES,
    Rule,
    few_group_rules,
    group_rule,
    inside_bounds,
    mirror_centres,
    rule_bounds,
)
from offline.fitting.held_out_rows import HeldOutRow
from service.catalog.intervals import LevelInterval
from service.pricing.evidence import LEVELS

__all__ = ["MIN_GROUPS", "MIN_ROWS", "Rule", "few_group_rules", "fit_level", "nested_inside"]


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
    few: Mapping[tuple[str, int], Rule] | None = None,
) -> LevelInterval | None:
    """The quantiles stated for `level` and `quantity`, from the first level of its chain with
    enough rows and groups (the service's own LevelInterval); None when no level has. `few`:
    `few_group_rules` of `rows` (computed when not given)."""
    fitted = fit_rule(rows, level, quantity, lower_q, upper_q, few)
    return None if fitted is None else fitted[0]


def fit_rule(
    rows: Sequence[HeldOutRow],
    level: str,
    quantity: str,
    lower_q: float,
    upper_q: float,
    few: Mapping[tuple[str, int], Rule] | None = None,
) -> tuple[LevelInterval, Rule] | None:
    """`fit_level`'s interval and the rule it was fitted under: `group_rule` on a level of
    MIN_GROUPS_TO_CHOOSE groups or more, else the `few_group_rules` one (or the nominal), its
    quantile moved up to the nearest these rows have bounds at."""
    if few is None:
        few = few_group_rules(rows, lower_q, upper_q)
    centres = mirror_centres(rows)
    for candidate in fallback_chain(level):
        chosen = [r for r in rows if r.level == candidate and r.quantity == quantity]
        groups = len({r.group for r in chosen})
        if len(chosen) < MIN_ROWS or groups < MIN_GROUPS:
            continue
        family_rule, floor = None, None
        if "family" not in (level, candidate):
            family = fit_rule(rows, "family", quantity, lower_q, upper_q, few)
            if family is not None and family[0].fitted_level == "family":
                family_rule = family[1]
                floor = (math.log(family[0].lower_ratio), math.log(family[0].upper_ratio))
        rule_key = groups
        if LEVELS.index(candidate) < LEVELS.index(level) and level != "custom":
            # a level with no rows of its own, taking a narrower one's: the borrowing rule
            rule_key = 0
            rule = few.get((quantity, 0), few.get(("", 0), Rule(lower_q)))
        elif groups >= MIN_GROUPS_TO_CHOOSE:
            rule = group_rule(chosen, candidate, lower_q, upper_q, rows, family_rule)
        else:
            keys = ((f"@{candidate}", groups), (quantity, groups), ("", groups))
            rule = next((few[k] for k in keys if k in few), Rule(lower_q))
        if floor is None:
            rule = replace(rule, floored=False)
        tries = [replace(rule, lower_q=q) for q in SCORE_QUANTILES if q >= rule.lower_q]
        found = [(t, rule_bounds(chosen, t, centres, floor)) for t in tries]
        rule, bounds = next(((t, b) for t, b in found if b is not None), (rule, None))
        if bounds is None:
            continue
        if rule_key == 0:
            # never narrower than the level it takes the rows of: that level knows more
            own = fit_rule(rows, candidate, quantity, lower_q, upper_q, few)
            if own is not None:
                own_bounds = math.log(own[0].lower_ratio), math.log(own[0].upper_ratio)
                bounds = min(bounds[0], own_bounds[0]), max(bounds[1], own_bounds[1])
        relative = [abs(r.predicted - r.measured) / r.measured for r in chosen]
        low, high = math.exp(bounds[0]), math.exp(bounds[1])
        mape = 100.0 * float(np.mean(relative))
        interval = LevelInterval(
            level, candidate, low, high, len(chosen), groups, mape, rule.lower_q,
            rule.mirrored, rule.floored,
        )  # fmt: skip
        return interval, rule
    return None


def width_ratio(interval: LevelInterval) -> float:
    """high / low of the interval a quote states (ratios widened to bracket the estimate)."""
    return max(interval.upper_ratio, 1.0) / min(interval.lower_ratio, 1.0)


def nested_inside(
    rows: Sequence[HeldOutRow],
    level: str,
    quantity: str,
    lower_q: float,
    upper_q: float,
    few_cache: dict[frozenset[str], dict[tuple[str, int], Rule]] | None = None,
) -> list[tuple[HeldOutRow, bool, float]]:
    """Each row of `level` and `quantity`, whether its measured value lies inside the interval
    stated with quantiles fitted without its group (all rows of the same measurements left out,
    at every level): the coverage a new group would see; and that interval's `width_ratio`
    (infinite where no interval could be fitted). `few_cache`: `few_group_rules` per set of
    row references left out, kept between calls on the same `rows`."""
    own = [r for r in rows if r.level == level and r.quantity == quantity]
    out: list[tuple[HeldOutRow, bool, float]] = []
    for group in sorted({r.group for r in own}):
        members = [r for r in own if r.group == group]
        refs = {r.row_ref for r in members}
        others = [r for r in rows if r.row_ref not in refs]
        cache = {} if few_cache is None else few_cache
        key = frozenset(refs)
        if key not in cache:
            cache[key] = few_group_rules(others, lower_q, upper_q)
        few = cache[key]
        fitted = fit_level(others, level, quantity, lower_q, upper_q, few)
        for r in members:
            if fitted is None:
                out.append((r, False, math.inf))
                continue
            bounds = (math.log(fitted.lower_ratio), math.log(fitted.upper_ratio))
            out.append((r, inside_bounds(r.log_ratio, bounds), width_ratio(fitted)))
    return out
