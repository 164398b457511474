"""The validation report of the regressor (Markdown) and its predicted-vs-measured plot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from offline.training.dataset import TrainingRow
from offline.training.validation import ErrorBounds, Interval, error_bounds, families_of

FloatArray = npt.NDArray[np.float64]
SOURCES = {
    "mlenergy-v2": "ML.ENERGY v2 (vLLM 0.5.4, A100/H100)",
    "mlenergy-v3": "ML.ENERGY v3 (vLLM 0.11.1, H100)",
}


@dataclass(frozen=True, slots=True)
class Method:
    """One column of the comparison: a name, what it is, its held-out log predictions."""

    name: str
    description: str
    log_predicted: FloatArray


@dataclass(frozen=True, slots=True)
class ReportInputs:
    rows: Sequence[TrainingRow]
    log_measured: FloatArray
    baselines: list[Method]
    regressor: Method
    ablations: list[Method]
    interval: Interval
    header: str
    notes: list[str]


def _row(label: str, e: ErrorBounds) -> str:
    return (
        f"| {label} | {e.count} | {e.mape_pct:.1f} | {e.within_5_pct:.0f} | "
        f"{e.within_10_pct:.0f} | {e.within_30_pct:.0f} | {e.median_ratio:.3f} |"
    )


_HEAD = (
    "| {} | rows | MAPE % | within 5 % | within 10 % | within 30 % | median pred/meas |\n"
    "|---|---|---|---|---|---|---|"
)


def metrics_table(first: str, methods: Sequence[Method], r: ReportInputs) -> list[str]:
    lines = [_HEAD.format(first)]
    for m in methods:
        lines.append(
            _row(f"{m.name}: {m.description}", error_bounds(m.log_predicted, r.log_measured))
        )
    return lines


def by_group(r: ReportInputs, methods: Sequence[Method], key: str) -> list[str]:
    """Per-source or per-family MAPE / within-10 % of each method."""
    groups = np.array([getattr(row, key) for row in r.rows])
    names = sorted(set(groups.tolist()))
    head = "| " + key + " | rows | " + " | ".join(f"{m.name} MAPE / w10" for m in methods) + " |"
    lines = [head, "|---|---|" + "---|" * len(methods)]
    for name in names:
        mask = groups == name
        cells = []
        for m in methods:
            e = error_bounds(m.log_predicted[mask], r.log_measured[mask])
            cells.append(f"{e.mape_pct:.1f} / {e.within_10_pct:.0f}")
        label = SOURCES.get(name, name)
        lines.append(f"| {label} | {int(mask.sum())} | " + " | ".join(cells) + " |")
    return lines


def write_report(path: Path, r: ReportInputs) -> None:
    """Write the Markdown report to `path` and the plot beside it (same stem, .png)."""
    plot = path.with_suffix(".png")
    main = [r.regressor, *r.baselines]
    iv = r.interval
    lines = [
        "# Learned energy regressor: validation",
        "",
        r.header,
        "",
        "## Held-out model families (leave-one-family-out), energy per request",
        "",
        *metrics_table("estimator", main, r),
        "",
        f"![predicted vs measured]({plot.name})",
        "",
        "### By source",
        "",
        *by_group(r, main, "source"),
        "",
        "### By held-out family",
        "",
        *by_group(r, main, "family"),
        "",
        "## Ablations (same folds, same training budget)",
        "",
        *metrics_table("variant", [r.regressor, *r.ablations], r),
        "",
        *by_group(r, [r.regressor, *r.ablations], "source"),
        "",
        "## Uncertainty interval",
        "",
        f"`gpu_j_low` / `gpu_j_high` = `gpu_j` x the {iv.lower_quantile:.0%} / "
        f"{iv.upper_quantile:.0%} quantiles of measured/predicted over every held-out "
        f"prediction of the regressor: x{iv.low_ratio:.3f} / x{iv.high_ratio:.3f} "
        f"(nominal coverage {iv.upper_quantile - iv.lower_quantile:.0%}).",
        "",
        "Measured coverage, each family's bounds taken only from the other families' held-out "
        f"residuals: **{iv.nested_coverage_pct:.1f} %** overall.",
        "",
        "| held-out family | coverage % |",
        "|---|---|",
        *(f"| {f} | {c:.0f} |" for f, c in iv.coverage_by_family.items()),
        "",
        "## Notes",
        "",
        *(f"- {n}" for n in r.notes),
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    _plot(plot, r)


def _plot(path: Path, r: ReportInputs) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = np.exp(r.log_measured)
    sources = np.array([row.source for row in r.rows])
    analytical = next(m for m in r.baselines if m.name == "analytical")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.8), sharex=True, sharey=True)
    for ax, method in zip(axes, (r.regressor, analytical), strict=True):
        predicted = np.exp(method.log_predicted)
        for source, marker in (("mlenergy-v2", "o"), ("mlenergy-v3", "^")):
            mask = sources == source
            ax.scatter(
                measured[mask], predicted[mask], s=10, marker=marker, alpha=0.6, label=source
            )
        low, high = measured.min() / 2, measured.max() * 2
        line = np.array([low, high])
        ax.plot(line, line, "k-", lw=0.8)
        for factor in (0.9, 1.1):
            ax.plot(line, line * factor, "k:", lw=0.6)
        e = error_bounds(method.log_predicted, r.log_measured)
        ax.set(xscale="log", yscale="log", xlabel="measured GPU energy per request batch [J]")
        ax.set_title(f"{method.name}: MAPE {e.mape_pct:.1f} %, {e.within_10_pct:.0f} % within 10 %")
        ax.legend(loc="upper left", fontsize=8)
    axes[0].set_ylabel("predicted (held-out family) [J]")
    fig.suptitle("ML.ENERGY energy per request, leave-one-family-out (dotted: ±10 %)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def family_list(rows: Sequence[TrainingRow]) -> str:
    return ", ".join(families_of(rows))
