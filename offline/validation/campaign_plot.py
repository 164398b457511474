"""The picture of offline.validation.campaign_report: predicted against measured, log-log."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from offline.validation.campaign_report import Pairs


def plot(
    kernels: dict[str, tuple[Pairs, Pairs]],
    end_to_end: dict[str, dict[str, Pairs]],
    path: Path,
) -> None:
    """Predicted against measured, log-log: kernel time and power by op type, end-to-end
    times (quantities ending in " s") and energies (the others) by kind of model
    (`end_to_end`: kind, then quantity)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.8))
    for op, (time_pairs, power_pairs) in sorted(kernels.items()):
        axes[0].scatter(np.array(time_pairs.measured) * 1e3, np.array(time_pairs.predicted) * 1e3)
        axes[1].scatter(power_pairs.measured, power_pairs.predicted, label=op)
    for marker, (kind, quantities) in zip("ox+", sorted(end_to_end.items()), strict=False):
        for colour, (q, pairs) in enumerate(quantities.items()):
            ax = axes[2] if q.endswith(" s") else axes[3]
            ax.scatter(
                pairs.measured,
                pairs.predicted,
                marker=marker,
                color=f"C{colour}",
                label=f"{q}, {kind}",
            )
    titles = ("kernel time [ms]", "kernel power [W]", "end-to-end time [s]", "batch energy [J]")
    for ax, title in zip(axes, titles, strict=True):
        ax.set(xscale="log", yscale="log", title=title, xlabel="measured", ylabel="predicted")
        lo = min(ax.get_xlim()[0], ax.get_ylim()[0])
        hi = max(ax.get_xlim()[1], ax.get_ylim()[1])
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
    for ax in axes[1:]:
        ax.legend(fontsize=7)
    fig.suptitle("Our cost model and service against our own H200 campaigns (black: equal)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
