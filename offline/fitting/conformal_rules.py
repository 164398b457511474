"""The rules split-conformal bounds are fitted under, and how inner folds choose them.

A `Rule` is the order statistics' lower quantile (the upper is 1 - it), whether the scores are
fitted with their mirror images about the family level's median score, and whether the bounds
are widened to hold the family level's (the floor). A level chooses its rule by inner folds
(offline/fitting/conformal.py says which): `group_rule` leaves each of its groups out,
`few_group_rules` learns a rule for fits on one or two groups on the cells with more, and
`borrowing_rules` one for a level that takes a narrower level's rows, on pairs of levels. Each
takes the rule whose held-out share is closest to the nominal; among rules that cover alike,
the floor is kept and the mirroring left out (`candidate_rules`' order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

from offline.fitting.held_out_rows import HeldOutRow
from service.catalog.intervals import conformal_bounds
from service.pricing.evidence import LEVELS

MIN_ROWS = 20  # at 0.1 / 0.9 each bound is then at least the 2nd score from its end
MIN_GROUPS = 1  # one vendor is all the data has; nested coverage still leaves it out
MIN_GROUPS_TO_CHOOSE = 3
SCORE_QUANTILES = (0.01, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25)
"""Lower order-statistic quantiles a rule chooses among (the upper is 1 - it)."""
_QS = np.array(SCORE_QUANTILES)
Bounds = tuple[float, float]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Rule:
    """How a level's bounds are fitted on its rows: the order statistics' lower quantile
    `lower_q` (the upper is 1 - it); `mirrored`: on each score and its mirror image about the
    family level's median score of the quantity (`fitted_scores`); `floored`: widened to hold
    the family level's bounds (a level of few groups cannot see how far a new group sits)."""

    lower_q: float
    mirrored: bool = False
    floored: bool = False


def candidate_rules(level: str) -> list[Rule]:
    """The rules a level chooses among, preferred first where two cover alike: floored before
    not (the guarantee holds unless the folds show it over-covers), unmirrored before mirrored.
    The family level is its own floor."""
    floors = (False,) if level == "family" else (True, False)
    return [Rule(q, m, f) for f in floors for m in (False, True) for q in SCORE_QUANTILES]


def inside_bounds(score: float, bounds: Bounds) -> bool:
    """Whether a score lies inside `bounds` widened to bracket the estimate (score 0)."""
    return min(bounds[0], 0.0) <= score <= max(bounds[1], 0.0)


class FamilyScores:
    """The `family` level's scores per quantity with their row references: inner folds refit
    the mirror centre and the floor without a group's references."""

    def __init__(self, rows: Sequence[HeldOutRow]) -> None:
        pairs: dict[str, list[tuple[str, float]]] = {}
        for r in rows:
            if r.level == "family":
                pairs.setdefault(r.quantity, []).append((r.row_ref, r.log_ratio))
        self._by = {
            q: (np.array([ref for ref, _ in v]), np.array([x for _, x in v]))
            for q, v in pairs.items()
        }

    def scores(self, quantity: str, without: frozenset[str] = frozenset()) -> FloatArray:
        refs, scores = self._by.get(quantity, (np.array([]), np.array([])))
        return scores[~np.isin(refs, list(without))] if without else scores

    def centres(self, without: frozenset[str] = frozenset()) -> dict[str, float]:
        """Per quantity, the median score (`mirror_centres`)."""
        medians = {q: self.scores(q, without) for q in self._by}
        return {q: float(np.median(v)) for q, v in medians.items() if len(v)}

    def centre(self, quantity: str, without: frozenset[str]) -> float:
        """`quantity`'s median score without `without` (0 without rows)."""
        scores = self.scores(quantity, without)
        return float(np.median(scores)) if len(scores) else 0.0

    def floor(self, quantity: str, rule: Rule | None, without: frozenset[str]) -> Bounds | None:
        """The family level's bounds of `quantity` under its `rule`, refitted without the row
        references `without` (an inner fold's floor); None without a rule or bounds."""
        scores = self.scores(quantity, without)
        if rule is None or not len(scores):
            return None
        if rule.mirrored:
            scores = np.concatenate([scores, 2.0 * float(np.median(scores)) - scores])
        return conformal_bounds(scores.tolist(), rule.lower_q, 1.0 - rule.lower_q)


def mirror_centres(
    rows: Sequence[HeldOutRow], without: frozenset[str] = frozenset()
) -> dict[str, float]:
    """Per quantity, the median score of the `family` level's rows (less those of the row
    references `without`): how the profiles err on what they were fitted on."""
    return FamilyScores(rows).centres(without)


def fitted_scores(
    rows: Sequence[HeldOutRow], centres: Mapping[str, float], mirrored: bool
) -> list[float]:
    """The scores bounds are fitted on: each row's and, `mirrored`, its mirror image about its
    quantity's centre (`mirror_centres`; 0 without one). Which of two engines is the profile
    and which is priced with it is an accident of what was measured (vllm-v0 priced as vllm-v1
    errs the other way from vllm-v1 priced as vllm-v0): a group never seen may sit on either
    side; the folds say where that holds (`candidate_rules`)."""
    scores = [r.log_ratio for r in rows]
    if not mirrored:
        return scores
    return scores + [2.0 * centres.get(r.quantity, 0.0) - r.log_ratio for r in rows]


def rule_bounds(
    rows: Sequence[HeldOutRow], rule: Rule, centres: Mapping[str, float], floor: Bounds | None
) -> Bounds | None:
    """`rows`' bounds under `rule` (`floor`: the family level's, applied when it is floored)."""
    scores = fitted_scores(rows, centres, rule.mirrored)
    bounds = conformal_bounds(scores, rule.lower_q, 1.0 - rule.lower_q)
    if bounds is None or floor is None or not rule.floored:
        return bounds
    return min(bounds[0], floor[0]), max(bounds[1], floor[1])


class _Tally:
    """Rows inside and in all per rule over inner folds, and the rules some fold had no
    bounds for."""

    def __init__(self) -> None:
        self.inside: Counter[Rule] = Counter()
        self.total: Counter[Rule] = Counter()
        self.missing: set[Rule] = set()

    def add(
        self,
        fit: FloatArray,
        members: FloatArray,
        rules: Sequence[Rule],
        centre: float,
        floor: Bounds | None,
    ) -> None:
        """Bounds of every rule fitted on scores `fit` (mirrored about `centre` where the rule
        says), and how many of the scores `members` each holds."""
        held = np.sort(members)
        wanted = set(rules)
        for mirrored in (False, True):
            both = np.concatenate([fit, 2.0 * centre - fit]) if mirrored else fit
            ordered = np.sort(both)
            n = len(ordered)
            k_lo = np.floor((n + 1) * _QS).astype(int)
            k_hi = np.ceil((n + 1) * (1.0 - _QS)).astype(int)
            ok = (k_lo >= 1) & (k_hi <= n)
            low = ordered[np.clip(k_lo - 1, 0, n - 1)]
            high = ordered[np.clip(k_hi - 1, 0, n - 1)]
            for floored in (False, True):
                lo, hi = low, high
                if floored and floor is not None:
                    lo, hi = np.minimum(lo, floor[0]), np.maximum(hi, floor[1])
                lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
                inside = np.searchsorted(held, hi, "right") - np.searchsorted(held, lo, "left")
                for i, q in enumerate(SCORE_QUANTILES):
                    rule = Rule(q, mirrored, floored)
                    if rule not in wanted:
                        continue
                    self.total[rule] += len(members)
                    if ok[i]:
                        self.inside[rule] += int(inside[i])
                    else:
                        self.missing.add(rule)

    def share(self, rule: Rule) -> float | None:
        return self.inside[rule] / self.total[rule] if self.total[rule] else None


def _best(shares: Mapping[Rule, float], rules: Sequence[Rule], nominal: float) -> Rule | None:
    """The rule whose share is closest to `nominal`; ties: the earlier of `rules`."""
    ranked = [(abs(shares[r] - nominal), i) for i, r in enumerate(rules) if r in shares]
    return rules[min(ranked)[1]] if ranked else None


def group_rule(
    rows: Sequence[HeldOutRow],
    level: str,
    lower_q: float,
    upper_q: float,
    every_row: Sequence[HeldOutRow] = (),
    family_rule: Rule | None = None,
) -> Rule:
    """The rule of `level` (`candidate_rules`) whose bounds, fitted without each group of
    `rows` in turn, hold that group's rows (pooled) closest to the nominal upper_q - lower_q;
    a rule some fold has no bounds for is out. Mirror centres and the family floor
    (`family_rule` on `every_row`'s family rows) are refitted without the group's rows too.
    The nominal rule with fewer than MIN_GROUPS_TO_CHOOSE groups (module doc)."""
    groups = sorted({r.group for r in rows})
    if len(groups) < MIN_GROUPS_TO_CHOOSE:
        return Rule(lower_q)
    rules, tally = candidate_rules(level), _Tally()
    quantity = rows[0].quantity
    family = FamilyScores(every_row)
    scores = {g: np.array([r.log_ratio for r in rows if r.group == g]) for g in groups}
    for group in groups:
        refs = frozenset(r.row_ref for r in rows if r.group == group)
        floor = family.floor(quantity, family_rule, refs)
        others = np.concatenate([scores[g] for g in groups if g != group])
        centre = family.centre(quantity, refs)
        tally.add(others, scores[group], rules, centre, floor)
    shares = {r: s for r in rules if r not in tally.missing and (s := tally.share(r)) is not None}
    return _best(shares, rules, upper_q - lower_q) or Rule(lower_q)


def few_group_rules(
    rows: Sequence[HeldOutRow], lower_q: float, upper_q: float
) -> dict[tuple[str, int], Rule]:
    """For a fit on G groups, G < MIN_GROUPS_TO_CHOOSE, of level L: the rule whose bounds
    fitted on G groups of a cell (L, Q) hold another group of that cell closest to the
    nominal share over L's cells, keyed ("@L", G); the same over quantity Q's cells, keyed
    (Q, G), and over every cell, keyed ("", G), for a level with no cell of more than G
    groups. Each group of a cell is left out in turn, bounds fitted on each set of G other
    groups with MIN_ROWS rows or more (rows of a fit without bounds count as outside); a
    cell's share pools its folds' rows, cells weigh equally. The floor is the family level's
    bounds refitted without the group left out, at the family rule `group_rule` chooses (the
    nominal one where the family has fewer groups). The rules keyed ("@L", G) and ("", G)
    pool other quantities' cells, phases whose groups may lie near or far apart (one family's
    wide TTFT residuals hold another's, a static prefill's do not): their quantile is never
    above the nominal, so a level's other phases widen a few-group fit but never narrow it
    below its own rows' nominal bounds; (Q, G), learnt on the same quantity, may. With
    `borrowing_rules`' too."""
    cells: dict[tuple[str, str], dict[str, list[HeldOutRow]]] = {}
    for r in rows:
        cells.setdefault((r.level, r.quantity), {}).setdefault(r.group, []).append(r)
    family_rules = {
        q: group_rule([r for g in groups.values() for r in g], "family", lower_q, upper_q, rows)
        for (level, q), groups in cells.items()
        if level == "family"
    }
    rules = candidate_rules("engine")
    widening = [r for r in rules if r.lower_q <= lower_q]
    family = FamilyScores(rows)
    chosen: dict[tuple[str, int], Rule] = {}
    for size in range(1, MIN_GROUPS_TO_CHOOSE):
        shares: dict[str, dict[Rule, list[float]]] = {}
        for (level, quantity), groups in cells.items():
            if len(groups) <= size:
                continue
            tally = _Tally()
            scores = {g: np.array([r.log_ratio for r in m]) for g, m in groups.items()}
            for left_out, members in groups.items():
                refs = frozenset(r.row_ref for r in members)
                floor = family.floor(quantity, family_rules.get(quantity), refs)
                centre = family.centre(quantity, refs)
                others = [g for g in groups if g != left_out]
                for fitted_on in combinations(others, size):
                    pooled = np.concatenate([scores[g] for g in fitted_on])
                    if len(pooled) >= MIN_ROWS:
                        tally.add(pooled, scores[left_out], rules, centre, floor)
            for rule in rules:
                share = tally.share(rule)
                if share is not None:
                    for key in (f"@{level}", quantity, ""):
                        shares.setdefault(key, {}).setdefault(rule, []).append(share)
        for key, by_rule in shares.items():
            means = {r: float(np.mean(v)) for r, v in by_rule.items()}
            # learnt on other quantities' cells (the level's, every one's): only widening
            own_quantity = not key.startswith("@") and key != ""
            best = _best(means, rules if own_quantity else widening, upper_q - lower_q)
            if best is not None:
                chosen[(key, size)] = best
    return {**chosen, **borrowing_rules(rows, lower_q, upper_q)}


def borrowing_rules(
    rows: Sequence[HeldOutRow], lower_q: float, upper_q: float
) -> dict[tuple[str, int], Rule]:
    """For a level with no rows of its own that takes a narrower level's (a first vendor takes
    the GPU level's): the rule whose bounds, fitted on a narrower level's rows of quantity Q,
    hold a wider level's rows of Q closest to the nominal share (pairs of cells with MIN_ROWS
    rows each, weighing equally), keyed (Q, 0), and ("", 0) over every quantity's pairs. Both
    cells may hold the same measurements priced under different held-out fits: what is
    learnt is how much further a wider level's residuals spread. Unfloored (the floor is a
    narrower level's own); `custom` is never a wider level (it is the family level by
    design)."""
    cells: dict[tuple[str, str], list[HeldOutRow]] = {}
    for r in rows:
        cells.setdefault((r.level, r.quantity), []).append(r)
    rules = [r for r in candidate_rules("engine") if not r.floored]
    family = FamilyScores(rows)
    shares: dict[str, dict[Rule, list[float]]] = {}
    for (narrow, quantity), fit in cells.items():
        for (wide, other), cover in cells.items():
            ranks = LEVELS.index(narrow), LEVELS.index(wide)
            if other != quantity or ranks[0] >= ranks[1] or "custom" in (narrow, wide):
                continue
            if min(len(fit), len(cover)) < MIN_ROWS:
                continue
            tally = _Tally()
            refs = frozenset(r.row_ref for r in cover)
            fitted, covered = (np.array([r.log_ratio for r in x]) for x in (fit, cover))
            tally.add(fitted, covered, rules, family.centre(quantity, refs), None)
            for rule in rules:
                share = tally.share(rule)
                if share is not None and rule not in tally.missing:
                    for key in (quantity, ""):
                        shares.setdefault(key, {}).setdefault(rule, []).append(share)
    chosen: dict[tuple[str, int], Rule] = {}
    for key, by_rule in shares.items():
        pairs = max(len(v) for v in by_rule.values())  # rules with bounds on every pair
        means = {r: float(np.mean(v)) for r, v in by_rule.items() if len(v) == pairs}
        best = _best(means, rules, upper_q - lower_q)
        if best is not None:
            chosen[(key, 0)] = best
    return chosen
