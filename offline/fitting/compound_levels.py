"""Quotes at two evidence levels at once: a GPU (or vendor) never fitted on AND an engine version
never measured, and the rule that compounds the two levels' intervals.

The service places a quote at its widest level (service/pricing/evidence.py); a version never
measured is priced with the nearest measured version's profile. A first vendor under such a
version (Argonne's MI250 runs: vLLM 0.6.1, priced with the vllm-v0 profile fitted on 0.5.4)
meets both errors. How two levels' errors add up is learnt here on rows that are two levels at
once and that hold no vendor row: aiconfigurator's runs with their GPU held out
(silicon_levels.py: the profile refitted without that GPU's runs and kernel tables) whose
engine version never ran on the other GPU, so that the refit saw neither their GPU nor their
version. Each group is one (GPU, engine, version); runs without a recorded version are left
out (their version is unknown, so may be one the other GPU ran).

A rule (service/catalog/intervals.py COMPOUNDS) combines the GPU level's and the engine
level's log-bounds, each widened to bracket 0: `alone` (the GPU level's: no compounding),
`widest` (their envelope), `rss` (the root of the sum of squares per side: independent
errors of Gaussian shape), `sum` (the log-bounds added: independent errors whose extremes
coincide). Chosen by leaving each compound group
out: the rule whose intervals, both levels fitted without that group's rows, hold the
group's rows (pooled over the quantities, each weighing equally) closest to the nominal.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from offline.fitting.conformal import fit_level
from offline.fitting.conformal_rules import Bounds, Rule, few_group_rules, inside_bounds
from offline.fitting.held_out_rows import HeldOutRow
from offline.fitting.silicon_levels import SOURCE as SILICON_SOURCE
from offline.fitting.silicon_rows import SILICON_CSV
from service.catalog.intervals import COMPOUNDS, compound_log_bounds
from service.pricing.evidence import COMPOUNDED

Compounded = tuple[HeldOutRow, dict[str, bool], dict[str, float]]
"""A row, whether it is inside per compound rule, and the compounded width per rule."""
FewCache = dict[frozenset[str], dict[tuple[str, int], Rule]]


def compound_rows(rows: Sequence[HeldOutRow], data_dir: Path) -> list[HeldOutRow]:
    """GPU-held-out silicon rows whose engine version never ran on another GPU, regrouped by
    (GPU, engine, version) (module doc)."""
    with (data_dir / SILICON_CSV).open(newline="", encoding="utf-8") as handle:
        versions = {
            f"{SILICON_CSV}:{line}": row["backend_version"]
            for line, row in enumerate(csv.DictReader(handle), start=2)
        }
    silicon = [r for r in rows if r.level == "gpu" and r.source == SILICON_SOURCE]
    ran: dict[tuple[str, str], set[str]] = {}
    for r in silicon:
        ran.setdefault((r.engine, versions[r.row_ref]), set()).add(r.gpu)
    out: list[HeldOutRow] = []
    for r in silicon:
        version = versions[r.row_ref]
        if version and ran[(r.engine, version)] == {r.gpu}:
            out.append(replace(r, group=f"{r.gpu} {r.engine} {version}"))
    return out


def level_bounds(
    rows: Sequence[HeldOutRow],
    level: str,
    quantity: str,
    quantiles: tuple[float, float],
    few: dict[tuple[str, int], Rule],
) -> Bounds | None:
    """`level`'s stated log-bounds of `quantity` fitted on `rows` (None: no level fits)."""
    fitted = fit_level(rows, level, quantity, *quantiles, few)
    if fitted is None:
        return None
    return math.log(fitted.lower_ratio), math.log(fitted.upper_ratio)


def compound_inside(
    rows: Sequence[HeldOutRow],
    tested: Sequence[HeldOutRow],
    level: str,
    quantiles: tuple[float, float],
    few_cache: FewCache,
) -> dict[str, list[Compounded]]:
    """Per group of `tested` (rows of `level`, each also a version never measured): each
    row, whether it lies inside `level`'s and the engine level's intervals compounded by
    each rule of COMPOUNDS, both fitted on `rows` without the group's row references (every
    level), and per rule the compounded interval's width (high / low)."""
    out: dict[str, list[Compounded]] = {}
    for group in sorted({r.group for r in tested}):
        members = [r for r in tested if r.group == group]
        refs = frozenset(r.row_ref for r in members)
        others = [r for r in rows if r.row_ref not in refs]
        if refs not in few_cache:
            few_cache[refs] = few_group_rules(others, *quantiles)
        few = few_cache[refs]
        for quantity in sorted({r.quantity for r in members}):
            own = level_bounds(others, level, quantity, quantiles, few)
            engine = level_bounds(others, "engine", quantity, quantiles, few)
            for r in (m for m in members if m.quantity == quantity):
                if own is None or engine is None:
                    none = dict.fromkeys(COMPOUNDS, False)
                    out.setdefault(group, []).append((r, none, dict.fromkeys(COMPOUNDS, math.inf)))
                    continue
                both = {h: compound_log_bounds(own, engine, h) for h in COMPOUNDS}
                flags = {h: inside_bounds(r.log_ratio, b) for h, b in both.items()}
                widths = {h: math.exp(b[1] - b[0]) for h, b in both.items()}
                out.setdefault(group, []).append((r, flags, widths))
    return out


def share_inside(flags: Sequence[Compounded], how: str) -> float:
    """The share of rows inside under rule `how`, each quantity weighing equally."""
    by_quantity: dict[str, list[bool]] = {}
    for r, inside, _ in flags:
        by_quantity.setdefault(r.quantity, []).append(inside[how])
    return float(np.mean([np.mean(v) for v in by_quantity.values()]))


def choose_compound(
    inside: dict[str, list[Compounded]],
    nominal: float,
    without: str = "",
) -> str:
    """The rule of COMPOUNDS whose pooled share over `inside`'s groups (less `without`) is
    closest to `nominal`; ties: the narrower."""
    pooled = [x for g, v in inside.items() if g != without for x in v]
    if not pooled:
        return COMPOUNDS[0]
    return min(
        COMPOUNDS, key=lambda h: (abs(share_inside(pooled, h) - nominal), COMPOUNDS.index(h))
    )


def twice_rows(rows: Sequence[HeldOutRow], level: str, quantity: str) -> list[HeldOutRow]:
    """`level`'s rows of `quantity` that are a version never measured too (the service's
    engine label "<engine>==<version>") where the service compounds `level` (COMPOUNDED)."""
    if level not in COMPOUNDED:
        return []
    return [r for r in rows if r.level == level and r.quantity == quantity and "==" in r.engine]


def nested_choice(
    inside: dict[str, list[Compounded]], nominal: float
) -> list[tuple[HeldOutRow, bool, float]]:
    """Each compound row inside the rule chosen without its group (`choose_compound`), and
    that rule's width: the coverage the choice itself would see on a new group."""
    out: list[tuple[HeldOutRow, bool, float]] = []
    for group, members in inside.items():
        how = choose_compound(inside, nominal, without=group)
        out += [(r, flags[how], widths[how]) for r, flags, widths in members]
    return out
