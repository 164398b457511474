"""The coverage report of the stated intervals per evidence level (markdown), written by
`python -m offline.fitting.intervals`."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from offline.fitting.compound_levels import (
    Compounded,
    FewCache,
    compound_inside,
    nested_choice,
    share_inside,
    twice_rows,
)
from offline.fitting.conformal import nested_inside
from offline.fitting.held_out_rows import HeldOutRow
from offline.fitting.metrics import accuracy
from service.catalog.intervals import COMPOUNDS, QUANTITIES
from service.pricing.evidence import LEVELS

WHY_OUTSIDE = {
    "GPU held out prefill": "the Splitwise rows hold two GPUs on opposite sides of the "
    "estimate, so each fold fits on one GPU and covers the other: fitted on A100-SXM4-80GB "
    "alone (under the one-group rule the GPU level's other cells teach: unmirrored), about "
    "half of H100's prompt phases fall under the lower bound. No third GPU's prompt phase is "
    "measured in ../shared/data: aiconfigurator's serving runs start at a concurrency of 2 "
    "(none is one prefill pass alone), Vidur's profiles are of the same two GPUs, and a pass "
    "composed from aiconfigurator's kernel tables (H200, L40S) would be the cost model's own "
    "composition of measured kernels (no host time, no launch gaps), not the measured prompt "
    "phase this cell bounds. A mirrored rule would cover both GPUs, but no other cell's folds "
    "choose one for the GPU level: not forced.",
    "vendor held out total": "one group (AMD: one GPU, one vLLM release, one lab's harness). "
    "Nested, its interval is fitted without it: the GPU level's under the borrowing rule, "
    "compounded with the engine level's (a vLLM release never measured) under the compound "
    "rule learnt on the GPU x version groups below. No residual those levels hold is as far off as "
    "these runs (the vllm-v0 profile's host time per step and per worker, fitted on vLLM "
    "0.5.4, against vLLM 0.6.1 with a worker per GCD; docs/design/intervals.md). One vendor "
    "group cannot calibrate a vendor level, and a width or factor fitted to these rows would "
    "make this cell a training figure: left outside.",
}
"""Why a cell lies more than 10 points from the nominal, where no honest rule moved it."""

NAMES = {
    "family": "model family held out",
    "custom": "custom architecture",
    "precision": "unvalidated precision",
    "engine": "engine held out",
    "gpu": "GPU held out",
    "vendor": "vendor held out",
}


def coverage_report(
    rows: list[HeldOutRow],
    document: dict[str, Any],
    skipped: Counter[str],
    quantiles: tuple[float, float],
    compound: dict[str, list[Compounded]] | None = None,
    few_cache: FewCache | None = None,
) -> str:
    """Rows per level, the stated quantiles, and nested coverage beside MAPE (markdown);
    `compound`: compound_levels.compound_inside of the rows at two levels at once;
    `few_cache`: few_group_rules per set of row references left out, kept between calls."""
    nominal = 100.0 * (quantiles[1] - quantiles[0])
    provenance = document["provenance"]
    lines = [
        "# Coverage of the stated intervals, per evidence level",
        "",
        f"Made by `{provenance['command']}` at {provenance['created_at']}. Data read from "
        "`../shared/data`: ML.ENERGY leaderboard v2/v3 (Apache-2.0), Splitwise (MIT) and "
        "Vidur (MIT) through the cost-model refits, aiconfigurator's silicon serving runs "
        "(Apache-2.0), Argonne's MI250 runs (BSD-3-Clause). The analytical estimate (no learned "
        "correction).",
        "",
        "Each quote's `_low`/`_high` are the estimate times exp of the split-conformal "
        f"{quantiles[0]:.0%}/{quantiles[1]:.0%} order statistics of ln(measured/predicted) of "
        "held-out rows at the quote's evidence level (offline/fitting/conformal.py), widened "
        "to bracket the estimate. Coverage here is nested: each row's interval comes from "
        "quantiles fitted without its group (every row of the same measurement left out, at "
        f"every level): the share a never-seen group would see. Nominal: {nominal:.0f} %. "
        "Each cell's rule (offline/fitting/conformal.py) is chosen by inner folds: the order "
        "statistics' quantile q (the `q` column below; nominal 0.1), whether the scores are "
        "fitted with their mirror images about the family level's median score (`mirrored`), "
        "and whether the bounds are widened to hold the family level's (`floored`: no level "
        "narrower than the one with the most groups). Where the rows hold three groups or "
        "more: the rule whose bounds, fitted without each group in turn, hold that group's "
        "rows (pooled) closest to 80 %; with one or two groups (too few to tell how far a new "
        "group may sit): the rule whose bounds fitted on that many groups of another cell of "
        "the same quantity hold a further group of that cell closest to 80 %, over every cell "
        "with more groups; a rule learnt on other quantities' cells (the level's own cells "
        "come first, then the quantity's, then all) takes no quantile above the nominal: "
        "another phase's groups may hold each other for reasons of their own, and widen a "
        "few-group fit but never narrow it below its own rows' nominal bounds. "
        "Among rules that cover alike the floor is kept and the mirroring "
        "left out. In the nested check all of it is chosen without the row's group (the floor "
        "and the mirror centre refitted without each inner fold's group too), never on the "
        "coverage reported here.",
        "",
        "Chosen by looking at earlier reports' held-out coverage, and said so: the minimum of "
        "20 rows per level (was 30), which gives the family-held-out prefill cell an interval "
        "(BLOOM's 26 rows) where it had none; the few-group rule learnt per quantity (after "
        "trying all quantities pooled); after four cells covered 93-96 % under a fixed "
        "engine mirroring and family floor, making both a choice of the inner folds as q is; "
        "the rule for a level without rows of its own taking a narrower level's (the borrowing "
        "rule, tried after the first vendor's total fell to 57 % under the GPU level's "
        "interval; it does not raise it: no narrower level's residuals show how far a first "
        "vendor sits); and the few-group rule learnt on the level's own "
        "cells first, then the quantity's (tried after the per-quantity one, as the issue asked "
        "for a rule per level; 11 of 15 cells within 10 points either way); the cap at the "
        "nominal quantile on rules learnt on other quantities (tried after the family-held-"
        "out prefill cell covered 60 % under a quantile 0.25 learnt on the family level's "
        "other phases, and after ranking the rule's source by leaving cells out, which "
        "over-covered the GPU level's total). The compound rule for a quote at two levels at "
        "once (a first GPU or vendor under an engine version never measured; section below): "
        "how it is chosen (rows pooled per quantity, quantities weighing equally, as the other "
        "rules pool their folds' rows) and three candidates (envelope, root sum of squares, "
        "sum) were fixed before its coverage was seen; the fourth, the level's interval alone "
        "(no compounding: what the service did before), added after seeing the compound "
        "cells' TPOT covered 98 % under the envelope, the narrowest of the three; seen too, "
        "with the vendor cell's coverage under every rule: groups weighing equally would "
        "choose another rule (the table's last rows); not adopted, as that choice would have "
        "been made by looking at the vendor cell. Widths are shown beside coverage for that "
        "reason.",
        "",
        "Rows per level: ML.ENERGY (energy, TPOT) and Splitwise (`prefill`: a static "
        "batch's measured prompt phase) with the model family held out of every refit "
        "(`family`) or the GPU (`gpu`: A100-SXM4-40GB, H100-SXM5-80GB in ML.ENERGY v2; "
        "A100-SXM4-80GB, H100-SXM5-80GB in Splitwise), or their engine (`engine`: vllm-v0 = "
        "leaderboard v2 priced with the vllm-v1 profile, vllm-v1 = v3 priced with vllm-v0's); "
        "aiconfigurator's silicon runs (`ttft`, TPOT, TTFT + (osl - 1) x TPOT) priced as the "
        "service prices them, with their own engine's profile (`vllm`, `sglang`, `trtllm`: "
        "kernel efficiencies, decode overheads, TTFT wave and host terms) refitted without the "
        "run's group (offline/fitting/silicon_levels.py): H100 runs without their model family "
        "(`family`) and without their engine version (`engine`, group `<engine> <version>`: "
        "what a version never measured meets), H100 and H200 runs without their GPU's runs and "
        "kernel tables (`gpu`); Argonne's MI250 vLLM runs `vendor` (whole static batch time). "
        "A static quote's `prefill_s` interval is `prefill`'s; a quote joining a running server "
        "(`serving.concurrent_sequences`) takes `ttft`'s: the measured TTFT of a request "
        "joining a loaded server (queueing included).",
        "",
        "## Held-out rows per level",
        "",
        "| level | quantity | rows | groups | groups (rows) |",
        "|---|---|--:|--:|---|",
    ]
    for level in LEVELS:
        for quantity in QUANTITIES:
            own = [r for r in rows if r.level == level and r.quantity == quantity]
            if own:
                groups = Counter(r.group for r in own)
                listed = ", ".join(f"{g} ({n})" for g, n in sorted(groups.items()))
                lines.append(
                    f"| {NAMES[level]} | {quantity} | {len(own)} | {len(groups)} | {listed} |"
                )
    lines += [
        "",
        "## Coverage (nested) beside accuracy",
        "",
        "`width`: the median over the cell's rows of its interval's high / low (the stated "
        "interval, widened to bracket the estimate): an interval that covers only by being "
        "wide shows it here.",
        "",
        "| level | quantity | rows | inside 80 % interval | width high/low | MAPE % "
        "| within 10 % | within 30 % | median pred/meas |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    outside: list[str] = []
    few_cache = {} if few_cache is None else few_cache
    for level in LEVELS:
        for quantity in QUANTITIES:
            inside = nested_inside(rows, level, quantity, *quantiles, few_cache)
            inside = _compounded(rows, inside, level, quantity, quantiles, few_cache, document)
            if not inside:
                continue
            share = 100.0 * float(np.mean([ok for _, ok, _ in inside]))
            if abs(share - nominal) > 10.0:
                outside.append(f"{NAMES[level]} {quantity} ({share:.0f} %)")
            width = float(np.median([w for _, _, w in inside]))
            measured = np.array([r.measured for r, _, _ in inside])
            predicted = np.array([r.predicted for r, _, _ in inside])
            acc = accuracy(predicted, measured).as_row()
            lines.append(
                f"| {NAMES[level]} | {quantity} | {acc[0]} | {share:.0f} % | {width:.2f} | "
                + " | ".join(acc[1:])
                + " |"
            )
    lines += [
        "",
        f"More than 10 points from {nominal:.0f} %: " + (", ".join(outside) or "none") + ".",
        "",
        *[
            f"- *{cell}*: {WHY_OUTSIDE[cell.rsplit(' (', 1)[0]]}"
            for cell in outside
            if cell.rsplit(" (", 1)[0] in WHY_OUTSIDE
        ],
        "",
        "## Quantiles the service states (service/catalog/data/intervals.json)",
        "",
        "A level with too few rows or groups takes a wider level's quantiles (`fitted on`).",
        "",
        "| level | quantity | fitted on | rows | q | mirrored | floored | low ratio | high ratio "
        "| held-out MAPE % |",
        "|---|---|---|--:|--:|---|---|--:|--:|--:|",
    ]
    for level, by_quantity in document["levels"].items():
        for quantity, fitted in by_quantity.items():
            lines.append(
                f"| {NAMES[level]} | {quantity} | {NAMES[fitted['fitted_level']]} | "
                f"{fitted['rows']} | {fitted['score_quantile']} | "
                f"{'yes' if fitted.get('mirrored') else 'no'} | "
                f"{'yes' if fitted.get('floored') else 'no'} | {fitted['lower_ratio']:.3f} | "
                f"{fitted['upper_ratio']:.3f} | "
                f"{fitted['mape_pct']:.1f} |"
            )
    if compound:
        lines += _compound_section(compound, document["compound_rule"], nominal)
        twice = twice_rows(rows, "vendor", "total")
        if twice:
            vendor = compound_inside(rows, twice, "vendor", quantiles, few_cache)
            lines.append(_rule_row("vendor held out total (not a choice cell)", vendor, ""))
    lines += ["", "## Silicon runs left out", "", "| reason | runs |", "|---|--:|"]
    lines += [f"| {reason} | {n} |" for reason, n in sorted(skipped.items())]
    return "\n".join(lines) + "\n"


def _compounded(
    rows: list[HeldOutRow],
    inside: list[tuple[HeldOutRow, bool, float]],
    level: str,
    quantity: str,
    quantiles: tuple[float, float],
    few_cache: FewCache,
    document: dict[str, Any],
) -> list[tuple[HeldOutRow, bool, float]]:
    """`inside` with the rows that are a version never measured too judged by the interval
    the service states them: `level`'s compounded with the engine level's under the
    document's rule, both fitted without the row's group."""
    twice = twice_rows(rows, level, quantity)
    if not twice:
        return inside
    how = document["compound_rule"]
    by_group = compound_inside(rows, twice, level, quantiles, few_cache)
    judged = {id(r): (r, f[how], w[how]) for v in by_group.values() for r, f, w in v}
    return [judged.get(id(r), (r, ok, w)) for r, ok, w in inside]


def _compound_section(
    compound: dict[str, list[Compounded]], chosen: str, nominal: float
) -> list[str]:
    """Coverage of the compound groups under each rule, and under the rule chosen without
    each group."""
    members = [x for v in compound.values() for x in v]
    quantities = sorted({r.quantity for r, _, _ in members})
    nested = nested_choice(compound, nominal / 100.0)
    lines = [
        "",
        "## Quotes at two levels at once (offline/fitting/compound_levels.py)",
        "",
        "A quote on a GPU (vendor) never fitted on under an engine version never measured "
        "states its level's interval compounded with the engine level's under a rule (`alone`: "
        "its level's only, `widest`: the envelope, `rss`: root sum of squares of the "
        "log-bounds, `sum`: their sum). The rule is learnt on "
        f"{len(compound)} groups of aiconfigurator runs with their GPU held out whose version "
        "never ran on the other GPU (" + ", ".join(sorted(compound)) + "), no vendor row among "
        f"them: `{chosen}` (closest to {nominal:.0f} % over all of them, quantities weighing "
        "equally). Rows inside per rule (the choice cells themselves: in-sample for the "
        "choice), and under the rule chosen without the row's group (nested: what a new group "
        "would see); median width high/low in brackets.",
        "",
        "| quantity | rows | " + " | ".join(COMPOUNDS) + " | rule chosen without the group |",
        "|---|--:|" + "--:|" * (len(COMPOUNDS) + 1),
    ]
    for quantity in quantities:
        lines.append(_rule_row(quantity, compound, quantity, nested))
    lines.append(_rule_row("all (rows pooled per quantity)", compound, "", nested))
    groups = [
        f"{100.0 * np.mean([share_inside(v, h) for v in compound.values()]):.0f} %"
        for h in COMPOUNDS
    ]
    lines.append(
        f"| all (groups weighing equally) | {len(members)} | " + " | ".join(groups) + " | |"
    )
    return lines


def _rule_row(
    name: str,
    compound: dict[str, list[Compounded]],
    quantity: str,
    nested: list[tuple[HeldOutRow, bool, float]] | None = None,
) -> str:
    """One line of the compound table: rows inside and median width per rule (`quantity`
    only, or every quantity, each weighing equally), and under the nested choice."""
    members = [x for v in compound.values() for x in v if x[0].quantity == quantity or not quantity]
    cells = [
        f"{100.0 * share_inside(members, h):.0f} % ({np.median([w[h] for _, _, w in members]):.2f})"
        for h in COMPOUNDS
    ]
    if nested is None:
        cells.append("")
    else:
        held = [(ok, w) for r, ok, w in nested if r.quantity == quantity or not quantity]
        cells.append(
            f"{100.0 * np.mean([ok for ok, _ in held]):.0f} % "
            f"({np.median([w for _, w in held]):.2f})"
        )
    return f"| {name} | {len(members)} | " + " | ".join(cells) + " |"
