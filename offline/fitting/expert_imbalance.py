"""The expert-parallel load imbalance, fitted on aiconfigurator's MoE kernel tables.

aiconfigurator (NVIDIA, Apache-2.0) times every MoE layer shape of each engine under three
routings: `balanced` and power-law expert popularity with alpha 1.01 (its default serving
assumption) and 1.2 (``kernels/<gpu>/moe/<engine>/<version>/moe_perf.parquet``). At many
tokens (>= 4096: the expert GEMMs are compute-bound, their time follows the rows of the most
loaded rank) the ratio power-law 1.01 / balanced is the most loaded expert-parallel rank's
rows over the mean, the factor an all-to-all's slowest receiver carries too. It grows about
linearly in log2(EP); `fit_imbalance_per_doubling` takes the median of
(ratio - 1) / log2(EP) over every engine's tables on H100 and H200.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from offline.fitting.cross_validation import HeldOut
from offline.fitting.datasets_common import resolve_data_dir
from offline.fitting.engine_gemm import GEMM_GPUS
from offline.validation.kernel_tables import kernel_table_files

MIN_TOKENS = 4096
ROUTED = "power_law_1.01"
BALANCED = "balanced"
_SHAPE = (
    "kernel_source",
    "moe_dtype",
    "num_tokens",
    "hidden_size",
    "inter_size",
    "topk",
    "num_experts",
    "moe_tp_size",
    "moe_ep_size",
)


def imbalance_ratios(data_dir: Path) -> list[tuple[str, int, float]]:
    """(engine, EP degree, power-law / balanced time) of every MoE shape with EP > 1 and
    at least MIN_TOKENS tokens in the H100/H200 tables."""
    ratios = []
    root = resolve_data_dir(data_dir)
    for file in kernel_table_files(data_dir, gpus=GEMM_GPUS, tables=("moe_perf",)):
        if file.op_folder == "moe":
            engine = file.engine
            columns = [*_SHAPE, "distribution", "latency"]
            table = pq.read_table(root / file.relative, columns=columns).to_pydict()
            times: dict[tuple[int, int, tuple[object, ...]], dict[str, float]] = defaultdict(dict)
            for i, distribution in enumerate(table["distribution"]):
                ep, tokens = int(table["moe_ep_size"][i]), int(table["num_tokens"][i])
                shape = (ep, tokens, tuple(table[c][i] for c in _SHAPE))
                times[shape][distribution] = table["latency"][i]
            for (ep, tokens, _), by in times.items():
                if ep > 1 and tokens >= MIN_TOKENS and by.get(BALANCED, 0) > 0 and ROUTED in by:
                    ratios.append((engine, ep, by[ROUTED] / by[BALANCED]))
    return ratios


def fit_imbalance_per_doubling(ratios: list[tuple[str, int, float]]) -> float:
    """Median of (ratio - 1) / log2(EP) [-]."""
    return float(np.median([(r - 1.0) / np.log2(ep) for _, ep, r in ratios]))


def add_held_out_engines(ratios: list[tuple[str, int, float]], held: HeldOut) -> None:
    """Per engine, the imbalance predicted without that engine's tables against its measured
    ratios, added to `held` as `imbalance:<engine>`."""
    for engine in sorted({e for e, _, _ in ratios}):
        slope = fit_imbalance_per_doubling([r for r in ratios if r[0] != engine])
        mine = [r for r in ratios if r[0] == engine]
        predicted = np.array([1.0 + slope * np.log2(ep) for _, ep, _ in mine])
        measured = np.array([r for _, _, r in mine])
        held.add(f"imbalance:{engine}", predicted, measured, [engine] * len(mine))
