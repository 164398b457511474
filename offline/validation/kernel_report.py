"""The kernel validation report: accuracy tables (markdown) and predicted-vs-measured plots."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from offline.fitting.metrics import Accuracy, accuracy

FloatArray = npt.NDArray[np.float64]
LARGE_KERNEL_S = 100e-6  # kernels this long are past the fixed-cost floor
HEADER = "| rows | MAPE % | within 10 % | within 30 % | median signed error % |"


@dataclass
class Group:
    """Measured and predicted values of one (op type, GPU, engine) group."""

    measured_s: list[FloatArray] = field(default_factory=list)
    predicted_s: list[FloatArray] = field(default_factory=list)
    measured_w: list[FloatArray] = field(default_factory=list)
    predicted_w: list[FloatArray] = field(default_factory=list)
    versions: set[str] = field(default_factory=set)
    power_versions: set[str] = field(default_factory=set)  # those with measured power

    def arrays(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        return (
            np.concatenate(self.measured_s),
            np.concatenate(self.predicted_s),
            np.concatenate(self.measured_w),
            np.concatenate(self.predicted_w),
        )


@dataclass(frozen=True, slots=True)
class NotPriced:
    """Rows the cost model does not price: a whole table kind, or rows of a priced one."""

    what: str
    reason: str
    gpus: tuple[str, ...]
    engines: tuple[str, ...]
    rows: int


def row_cells(acc: Accuracy) -> list[str]:
    """rows, MAPE, within 10 %, within 30 %, median signed error (median ratio - 1)."""
    return [
        str(acc.count),
        f"{acc.mape_pct:.1f}",
        f"{acc.within_10_pct:.0f}",
        f"{acc.within_30_pct:.0f}",
        f"{100.0 * (acc.median_ratio - 1.0):+.0f}",
    ]


def _large(measured: FloatArray, predicted: FloatArray) -> str:
    keep = measured >= LARGE_KERNEL_S
    if not keep.any():
        return "-"
    acc = accuracy(predicted[keep], measured[keep])
    return f"{acc.mape_pct:.1f} ({acc.count})"


def _table(head: str, rows: list[list[str]]) -> list[str]:
    columns = head.count("|") - 1
    return [head, "|" + "---|" * columns, *("| " + " | ".join(r) + " |" for r in rows)]


def markdown(
    groups: dict[tuple[str, str, str], Group], not_priced: list[NotPriced], preamble: list[str]
) -> str:
    """The report: per-op summary, per op x GPU x engine, H200 power, what is not priced."""
    by_op: dict[str, list[Group]] = defaultdict(list)
    for (op, _, _), group in groups.items():
        by_op[op].append(group)
    summary = []
    for op, members in sorted(by_op.items()):
        measured = np.concatenate([g.arrays()[0] for g in members])
        predicted = np.concatenate([g.arrays()[1] for g in members])
        cells = row_cells(accuracy(predicted, measured))
        summary.append([op, *cells, _large(measured, predicted)])
    detail, power = [], []
    for (op, gpu, engine), group in sorted(groups.items()):
        ms, ps, mw, pw = group.arrays()
        versions = ", ".join(sorted(group.versions))
        cells = row_cells(accuracy(ps, ms))
        detail.append([op, gpu, engine, versions, *cells, _large(ms, ps)])
        has_power = np.isfinite(mw)
        if has_power.any():
            acc = accuracy(pw[has_power], mw[has_power])
            medians = f"{np.median(mw[has_power]):.0f} / {np.median(pw[has_power]):.0f}"
            measured_in = ", ".join(sorted(group.power_versions))
            power.append([op, gpu, engine, measured_in, *row_cells(acc), medians])
    large = f"MAPE % of kernels >= {LARGE_KERNEL_S * 1e6:.0f} us (rows)"
    lines = [*preamble, "", "## Kernel time, per op type (all GPUs and engines)", ""]
    lines += _table(f"| op type {HEADER} {large} |", summary)
    lines += ["", "## Kernel time, per op type, GPU and engine", ""]
    lines += _table(f"| op type | GPU | engine | versions {HEADER} {large} |", detail)
    lines += ["", "## Power (tables with measured board power)", ""]
    lines += [
        "Measured: the board's mean power over the timed loop (NVML). Predicted: the power model",
        "(`service.core.roofline.kernel_gpu_j` over the kernel's roofline time, divided by it).",
        "",
    ]
    lines += _table(
        f"| op type | GPU | engine | versions {HEADER} median measured / predicted W |", power
    )
    lines += ["", "## Not priced", ""]
    lines += _table(
        "| table or op | reason | GPUs | engines | rows |",
        [
            [n.what, n.reason, ", ".join(n.gpus), ", ".join(n.engines), str(n.rows)]
            for n in not_priced
        ],
    )
    return "\n".join(lines) + "\n"


def family(op: str) -> str:
    """The plot panel of an op type: its label without dtype and parenthesised variant."""
    base = op.split(" (")[0]
    for prefix in ("gemm", "moe", "all-reduce"):
        if base.startswith(prefix):
            return prefix
    return base


def plot(groups: dict[tuple[str, str, str], Group], path: Path, per_panel: int = 4000) -> bool:
    """Predicted vs measured kernel time, log-log, one panel per op family, one colour per
    GPU; False when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[str, dict[str, list[FloatArray]]] = defaultdict(lambda: defaultdict(list))
    for (op, gpu, _), group in groups.items():
        ms, ps, _, _ = group.arrays()
        panels[family(op)][gpu].append(np.stack([ms, ps]))
    names = sorted(panels)
    cols = 3
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4.6 * rows), squeeze=False)
    rng = np.random.default_rng(0)
    for ax, name in zip(axes.flat, names, strict=False):
        for gpu, parts in sorted(panels[name].items()):
            points = np.concatenate(parts, axis=1)
            if points.shape[1] > per_panel:
                points = points[:, rng.choice(points.shape[1], per_panel, replace=False)]
            ax.scatter(points[0] * 1e3, points[1] * 1e3, s=3, alpha=0.35, label=gpu)
        ax.set(xscale="log", yscale="log", title=name, xlabel="measured ms", ylabel="predicted ms")
        lo = min(ax.get_xlim()[0], ax.get_ylim()[0])
        hi = max(ax.get_xlim()[1], ax.get_ylim()[1])
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
        ax.legend(markerscale=4, fontsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.suptitle("Cost model kernel time vs aiconfigurator measurements (black: equal)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True
