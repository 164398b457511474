"""Per-row held-out residuals of the analytical cost model on ML.ENERGY, for diagnosis.

    python -m offline.fitting.residuals --data ../shared/data --out /tmp/residuals.csv

For each model family, every coefficient is refitted without it (as `fit_cost_model`'s
leave-one-family-out) and its rows are predicted. Writes one CSV line per row (deployment,
measured and predicted time per output token, energy per request and, for v3, average power
per GPU) and prints predicted/measured summaries grouped by source and tensor-parallel degree,
and by source and family, so that time and power errors can be told apart.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import numpy.typing as npt

from offline.fitting.datasets import (
    DEFAULT_DATA_DIR,
    EnergyMeasurement,
)
from offline.fitting.end_to_end import (
    EndToEndRow,
    Overheads,
    end_to_end_rows,
    predicted_per_sequence_j,
    predicted_prefill_s,
    predicted_tpot_s,
)
from offline.fitting.family_folds import FoldData, fit_without
from offline.fitting.request_inputs import mlenergy_inputs

Line = dict[str, str | int | float]


def held_out_lines(data_dir: Path) -> list[Line]:
    """One dict per ML.ENERGY row the cost model represents, predicted without its family."""
    data = FoldData.load(data_dir)
    lines: list[Line] = []
    inputs = [mlenergy_inputs(m, data.models, data.gpus) for m in data.energy]
    for family in sorted({i.family for i in inputs if not isinstance(i, str)}):
        fold = fit_without(data, family)
        model, count = fold.model, 0
        for m in data.energy:
            # One call per measurement keeps each row paired with what it measured.
            rows, _ = end_to_end_rows([m], [], data.models, data.gpus, fold.coefficients)
            for r in rows:
                if r.family == family:
                    overheads, power = model.overheads[r.engine], model.power_of(r.engine)
                    lines.append(_line(m, r, overheads, power))
                    count += 1
        print(f"{family}: {count} rows", file=sys.stderr)
    return lines


def _line(
    m: EnergyMeasurement,
    r: EndToEndRow,
    overheads: Overheads,
    power: npt.NDArray[np.float64],
) -> Line:
    tpot_s = float(predicted_tpot_s([r], overheads)[0])
    per_sequence_j = float(predicted_per_sequence_j([r], overheads, power)[0])
    request_s = float(predicted_prefill_s([r], overheads)[0]) + r.decode_steps * tpot_s
    return {
        "source": m.source,
        "family": r.family,
        "model": m.model_id,
        "task": m.task,
        "gpu": r.gpu_id,
        "tensor": r.group_gpus // max(1, m.expert_parallel),
        "expert": m.expert_parallel,
        "gpus": r.gpu_count,
        "weights": m.weights_precision,
        "batch": r.batch_size,
        "output_tokens": m.output_tokens,
        "measured_tpot_s": m.time_per_output_token_s,
        "predicted_tpot_s": tpot_s,
        "measured_j": m.per_sequence_gpu_j,
        "predicted_j": per_sequence_j,
        # v3 only: average power per GPU, measured and as the static batch implies [W]
        "measured_w": (m.avg_power_w or float("nan")) / r.gpu_count,
        "predicted_w": per_sequence_j * r.batch_size / request_s / r.gpu_count,
    }


def summary(lines: list[Line], keys: tuple[str, ...]) -> str:
    """Rows, energy MAPE [%] and median predicted/measured energy, time and power per group."""
    groups: dict[tuple[str, ...], list[Line]] = defaultdict(list)
    for line in lines:
        groups[tuple(str(line[k]) for k in keys)].append(line)
    out = [f"{' / '.join(keys)}: rows, energy MAPE %, median pred/meas energy, time, power"]
    for key, group in sorted(groups.items()):
        energy = np.array([float(g["predicted_j"]) / float(g["measured_j"]) for g in group])
        time = [float(g["predicted_tpot_s"]) / float(g["measured_tpot_s"]) for g in group]
        power = [float(g["predicted_w"]) / float(g["measured_w"]) for g in group]
        power_text = "-" if np.all(np.isnan(power)) else f"{np.nanmedian(power):.3f}"
        out.append(
            f"  {' / '.join(key)}: {len(group)}, {100 * np.abs(energy - 1).mean():.1f}, "
            f"{np.median(energy):.3f}, {np.median(time):.3f}, {power_text}"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR, help="../shared/data")
    parser.add_argument("--out", type=Path, default=None, help="CSV of every row")
    args = parser.parse_args(argv)
    lines = held_out_lines(args.data)
    if args.out is not None:
        with args.out.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(lines[0]))
            writer.writeheader()
            writer.writerows(lines)
    print(summary(lines, ("source", "tensor")))
    print(summary(lines, ("source", "family")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
