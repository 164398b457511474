"""The intervals section of bench/recalibration_report.py's report: the rule of a calibrated
quote's interval checked on the posted rows, the quantiles stored, the scored rows' coverage."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.recalibration_coverage import RULES, scored_rule_coverage

LABELS = {"half": "half of the rows", "20": "20 rows"}


def interval_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """The intervals of the calibrated quotes: the rule checked on the posted rows, the
    quantiles stored, the scored rows' coverage before and after."""
    rule_rows = [
        f"| {LABELS[label]} | {quantity} | {name} | {cover:.0f} | {width:.2f} |"
        for label, r in results.items()
        for quantity, rules in r["rules"].items()
        for name, (cover, width) in rules.items()
    ]
    stored = [
        f"| {LABELS[label]} | {q['quantity']} | {q['n']} | {q['groups']} | "
        f"{np.exp(q['lower_log']):.3f} | {np.exp(q['upper_log']):.3f} | {100 * q['mape']:.1f} |"
        for label, r in results.items()
        for by_quantity in r["quantiles"].values()
        for q in by_quantity.values()
        if q["lower_log"] is not None
    ]
    scored = [
        f"| {LABELS[label]} | {r['energy_inside_before']:.0f} / {r['energy_inside_after']:.0f} | "
        f"{r['tpot_inside_before']:.0f} / {r['tpot_inside_after']:.0f} | "
        f"{r['total_inside_before']:.0f} / {r['total_inside_after']:.0f} |"
        for label, r in results.items()
    ]
    reference = []
    for label, r in results.items():
        (by_quantity,) = r["quantiles"].values()
        for name, measured, quoted, quantity in (
            ("energy", "measured_j", "after_j", "energy"),
            ("TPOT", "measured_tpot_s", "after_tpot_s", "total"),
        ):
            levels = [b["tpot" if name == "TPOT" else "energy"] for b in r["scored_levels"]]
            shares = scored_rule_coverage(r[measured], r[quoted], levels, by_quantity[quantity])
            cells = " | ".join(f"{shares[rule]:.0f}" for rule in RULES)
            reference.append(f"| {LABELS[label]} | {name} | {cells} |")
    return [
        "## Intervals of the calibrated quotes",
        "",
        "A quote moved by an active GPU fit takes the split-conformal 10 %/90 % quantiles of "
        "that fit's own k-fold residuals (ln measured / predicted on observations held out of "
        "each fold, folds by model): energy for `gpu_j`, total time for `total_s`, `decode_s` "
        "and the time per output token (observations measure no phase alone; `prefill_s` "
        "keeps its level's). The rule was written before any coverage was computed: the "
        "calibration's quantiles alone from 20 residuals of 2 models or more (the rows the "
        "offline fit asks of a level to stand alone), below that the wider of the "
        "calibration's and the level's bound on each side, and the level's with too few "
        "residuals for the order statistics (under 9).",
        "",
        "It was checked on the posted rows only, before the scored half was looked at: each "
        "model's k-fold residuals left out in turn, each rule fitted on the other models' "
        "residuals (and the level's interval of the left-out row's quote), the share of the "
        "left-out residuals inside (nominal 80 %) and the median width of the interval (high / "
        "low). With 20 posted rows a model left out leaves under 20, so the shipped rule is "
        "checked there in its fallback (the wider of the two) only.",
        "",
        "| posted | residuals | rule | inside % | width |",
        "|---|---|---|---|---|",
        *rule_rows,
        "",
        "The quantiles stored with each calibration (ratios measured / quoted; the last column "
        "the k-fold MAPE of those residuals):",
        "",
        "| posted | quantity | residuals | models | 10 % ratio | 90 % ratio | MAPE % |",
        "|---|---|---|---|---|---|---|",
        *stored,
        "",
        "On the scored rows, the share of measured values inside the quote's interval [%], "
        "before / after the calibration (after: the stored quantiles around the moved "
        "estimate):",
        "",
        "| posted | energy | time per output token | total time |",
        "|---|---|---|---|",
        *scored,
        "",
        "For reference only (computed after the rule was fixed, not used to choose it): the "
        "scored rows' coverage [%] under each rule, from the same stored quantiles and the "
        "level's interval of each quote.",
        "",
        "| posted | quantity | " + " | ".join(RULES) + " |",
        "|---|---|" + "---|" * len(RULES),
        *reference,
        "",
        _interval_reading(results),
        "",
    ]


def _interval_reading(results: dict[str, dict[str, Any]]) -> str:
    parts = [
        f"with {LABELS[label]} posted, energy {r['energy_inside_before']:.0f} -> "
        f"{r['energy_inside_after']:.0f} % and time per output token "
        f"{r['tpot_inside_before']:.0f} -> {r['tpot_inside_after']:.0f} %"
        for label, r in results.items()
    ]
    n = len(next(iter(results.values()))["measured_j"])
    error = 100 * float(np.sqrt(0.8 * 0.2 / n))
    return (
        "Reading: inside the quote's interval on the scored rows (nominal 80 %), "
        + "; ".join(parts)
        + f". On {n} rows one row is {100 / n:.1f} points and the binomial standard error at "
        f"80 % is {error:.1f} points. The rule was not changed after the scored half was seen."
    )
