"""The Markdown report and plot of bench/recalibration_report.py."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import numpy as np


def errors(predicted: list[float], measured: list[float]) -> dict[str, float]:
    """MAPE and shares within 10 % / 30 % [%]."""
    relative = np.abs(np.array(predicted) / np.array(measured) - 1.0)
    return {
        "mape": float(100 * relative.mean()),
        "w10": float(100 * (relative <= 0.10).mean()),
        "w30": float(100 * (relative <= 0.30).mean()),
    }


def row_line(label: str, result: dict[str, Any]) -> str:
    b = errors(result["before"], result["measured"])
    a = errors(result["after"], result["measured"])
    return (
        f"| {label} | {result['posted']} | {len(result['measured'])} | {b['mape']:.1f} | "
        f"{a['mape']:.1f} | {b['w10']:.0f} | {a['w10']:.0f} | {b['w30']:.0f} | {a['w30']:.0f} |"
    )


def segment_lines(family: str, calibration: dict[str, Any]) -> list[str]:
    return [
        f"| {family} | {s['gpu']} | {s['n']} | {s['mean_log_ratio']:+.3f} | {s['weight']:.2f} "
        f"| {s['factor']:.3f} |"
        for s in calibration["segments"]
    ]


def reading(results: dict[str, dict[str, Any]], pooled: dict[str, Any]) -> list[str]:
    """What this run shows, from its numbers."""
    change = {
        f: errors(r["after"], r["measured"])["mape"] - errors(r["before"], r["measured"])["mape"]
        for f, r in results.items()
    }
    better = ", ".join(f"{f} {d:+.1f}" for f, d in change.items() if d < -1.0) or "none"
    worse = ", ".join(f"{f} {d:+.1f}" for f, d in change.items() if d > 1.0) or "none"
    b, a = errors(pooled["before"], pooled["measured"]), errors(pooled["after"], pooled["measured"])
    return [
        f"Reading: over all families the calibration moves MAPE on the newer rows from "
        f"{b['mape']:.1f} % to {a['mape']:.1f} % and the share within 10 % from {b['w10']:.0f} % "
        f"to {a['w10']:.0f} %. MAPE falls by more than a point for: {better}; rises by more than "
        f"a point for: {worse} (points). One factor per GPU x family removes a bias that the "
        "family's rows share; it cannot remove scatter between the family's models (models of "
        "one family that the regressor errs on in opposite directions keep their errors), and "
        "the shrinkage keeps small segments close to no correction.",
    ]


def report(results: dict[str, dict[str, Any]], command: str, method: str, seed: int) -> str:
    pooled = {
        key: [v for r in results.values() for v in r[key]]
        for key in ("measured", "before", "after")
    }
    pooled["posted"] = sum(r["posted"] for r in results.values())
    refused = sum(r["refused"] for r in results.values())
    counts = [seg["n"] for r in results.values() for seg in r["calibration"]["segments"]]
    header = (
        "| held-out family | posted (older) | scored (newer) | MAPE % before | MAPE % after "
        "| within 10 % before | after | within 30 % before | after |"
    )
    lines = [
        "# Recalibration on rows the regressor never saw",
        "",
        f"Made by `{command}` (machine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; CPU only). Data: ML.ENERGY leaderboard v2 "
        "and v3 (Apache-2.0).",
        "",
        method,
        "",
        header,
        "|---|---|---|---|---|---|---|---|---|",
        *(row_line(f, r) for f, r in results.items()),
        row_line("**all families**", pooled),
        "",
        "![before and after, per held-out family](recalibration.png)",
        "",
        *reading(results, pooled),
        "",
        "## Calibration segments (GPU x family) fitted per experiment",
        "",
        "| held-out family | GPU | n fitted | mean ln(measured/predicted) | weight n/(n+k) "
        "| factor |",
        "|---|---|---|---|---|---|",
        *(line for f, r in results.items() for line in segment_lines(f, r["calibration"])),
        "",
        "## Limits",
        "",
        "- The data carry no time. The order of arrival is a fixed random permutation of each "
        f"family's rows (seed {seed}): `older` = its first half, `newer` = the rest. A real "
        "deployment's drift (a new engine version, a power cap) would show as a bias that "
        "grows with time; here the bias is the regressor's error on an unseen family.",
        "- Each calibration fits only 80 % of the posted rows (the newest 20 % are its own "
        f"holdout, the service's default), so a segment holds {min(counts)} to {max(counts)} "
        "fitted rows, and its factor keeps n/(n+10) of its mean log ratio.",
        "- Segments are GPU x family, not engine: llama and gemma mix ML.ENERGY v2 (vLLM 0.5.4) "
        "and v3 (vLLM 0.11.1) rows on H100, whose biases differ; one factor corrects their mean.",
        "- The regressor never saw the family; the analytical estimate it corrects uses the "
        "committed cost-model coefficients (about twenty global values: efficiencies, host "
        "overheads per engine, power; fitted on every family, none per family), as the service "
        "serves them.",
    ]
    if refused:
        lines.append(
            f"- {refused} rows the service refused to quote (the mapped deployment does not fit "
            "in GPU memory with the service's memory check) are left out."
        )
    return "\n".join(lines) + "\n"


def plot_families(results: dict[str, dict[str, Any]], path: Path) -> None:
    """MAPE on the newer rows per held-out family, before and after calibration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = list(results)
    before = [errors(results[f]["before"], results[f]["measured"])["mape"] for f in families]
    after = [errors(results[f]["after"], results[f]["measured"])["mape"] for f in families]
    x = np.arange(len(families))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(x - 0.2, before, 0.4, label="before (leave-family-out regressor)")
    ax.bar(x + 0.2, after, 0.4, label="after calibration on the older half")
    ax.set_xticks(x, families)
    ax.set_ylabel("MAPE on the newer half [%]")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
