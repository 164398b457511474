"""Does the regressor earn its place beyond the model families it saw? Leave one GPU out and
leave one serving engine out, beside the analytical model on the same rows.

    python -m offline.training.grouped --data ../shared/data [--members 10]
                                       [--out models/energy_gnn_grouped_validation.md]

Each fold refits the analytical cost model without the held-out group (as the family folds
of `offline.training.folds` do) and encodes every row with that fit; the regressor is then
trained on the other groups' rows and predicts the held-out ones. The analytical column is the
refitted cost model alone on the same rows.

- GPU folds: the ML.ENERGY v2 rows of one GPU (A100 or H100) held out; training keeps every
  other row (the v3 rows, all on H100, leave with H100). Held out are v2 rows only, so that
  both folds ask the same question: the same engine, another GPU.
- Engine folds: one vLLM generation's rows held out (v2: vLLM 0.5.4 = `vllm-v0`, v3: vLLM 0.11
  = `vllm-v1`); with no row of that engine left to fit its host overheads and power on, its
  rows are priced with the other engine's fitted profile, as the service prices an engine it
  has no measurements for.

The regressor's configuration (correction penalty, width, members) is the shipped one, decided
on inner family folds; nothing here is chosen by looking at these held-out results.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from offline.fitting.datasets import DEFAULT_DATA_DIR
from offline.fitting.family_folds import FoldData, engine_of_row, fit_without_group, gpu_of_row
from offline.fitting.request_inputs import ENGINE_OF_SOURCE
from offline.training.baselines import analytical_log_j
from offline.training.dataset import TrainingRow, load_training_rows, log_measured
from offline.training.fit import TrainConfig, predict_log_j, train_ensemble
from offline.training.folds import EngineCoefficients
from offline.training.train import CHOSEN, DEFAULTS, VERSION, load_priors
from offline.training.validation import ErrorBounds, Priors, error_bounds

logger = logging.getLogger("offline.training")
FloatArray = npt.NDArray[np.float64]
ML_ENERGY_ENGINES = tuple(ENGINE_OF_SOURCE[s] for s in ("mlenergy-v2", "mlenergy-v3"))


@dataclass(frozen=True, slots=True)
class Fold:
    """One held-out group: what it is, its rows (encoded with the fold's refit) and the mask of
    those held out (test) and of those trained on."""

    kind: str  # "GPU" or "engine"
    group: str
    rows: list[TrainingRow]
    test: npt.NDArray[np.bool_]
    train: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class FoldResult:
    fold: Fold
    regressor: ErrorBounds
    analytical: ErrorBounds
    train_rows: int


def engine_of(row: TrainingRow) -> str:
    return ENGINE_OF_SOURCE[row.source]


Mask = npt.NDArray[np.bool_]


def gpu_masks(rows: Sequence[TrainingRow], gpu: str) -> tuple[Mask, Mask]:
    """(held out, trained on): `gpu`'s v2 rows; every row on another GPU."""
    test = np.array([r.gpu_id == gpu and r.source == "mlenergy-v2" for r in rows])
    return test, np.array([r.gpu_id != gpu for r in rows])


def engine_masks(rows: Sequence[TrainingRow], engine: str) -> tuple[Mask, Mask]:
    """(held out, trained on): `engine`'s rows; every other row."""
    test = np.array([engine_of(r) == engine for r in rows])
    return test, ~test


def gpu_folds(data: FoldData, data_dir: Path) -> list[Fold]:
    """One fold per GPU of the v2 rows (see the module doc)."""
    folds = []
    for gpu in sorted({m.gpu_id for m in data.energy if m.source == "mlenergy-v2"}):
        kept = np.array(data.samples.gpu_id) != gpu
        refit = fit_without_group(data, gpu_of_row, gpu, kept, "GPU")
        engines: EngineCoefficients = {
            e: refit.model.coefficients(refit.coefficients, e) for e in refit.model.overheads
        }
        for missing in set(ML_ENERGY_ENGINES) - set(engines):  # H100 out: no v3 row is left
            engines[missing] = engines[ENGINE_OF_SOURCE["mlenergy-v2"]]  # in untested rows only
        rows, _ = load_training_rows(data_dir, engines=engines)
        folds.append(Fold("GPU", gpu, rows, *gpu_masks(rows, gpu)))
    return folds


def engine_folds(data: FoldData, data_dir: Path) -> list[Fold]:
    """One fold per vLLM generation, priced with the other's profile (see the module doc)."""
    folds = []
    all_samples = np.ones(len(data.samples.gpu_id), dtype=bool)
    for engine in ML_ENERGY_ENGINES:
        refit = fit_without_group(data, engine_of_row, engine, all_samples, "engine")
        (other,) = [e for e in ML_ENERGY_ENGINES if e != engine]
        engines = {
            e: refit.model.coefficients(refit.coefficients, other) for e in ML_ENERGY_ENGINES
        }
        rows, _ = load_training_rows(data_dir, engines=engines)
        folds.append(Fold("engine", engine, rows, *engine_masks(rows, engine)))
    return folds


def evaluate(fold: Fold, priors: Priors, config: TrainConfig) -> FoldResult:
    """Train on the fold's training rows, score both methods on its held-out rows."""
    train = [r for r, t in zip(fold.rows, fold.train, strict=True) if t]
    test = [r for r, t in zip(fold.rows, fold.test, strict=True) if t]
    weights = priors.weights(train, CHOSEN.focused)
    model = train_ensemble(train, weights, CHOSEN, config, f"-{fold.kind} {fold.group}")
    measured = log_measured(test)
    return FoldResult(
        fold,
        error_bounds(predict_log_j(model, test), measured),
        error_bounds(analytical_log_j(test), measured),
        len(train),
    )


def _cells(e: ErrorBounds) -> str:
    return (
        f"{e.mape_pct:.1f} | {e.within_10_pct:.0f} | {e.within_30_pct:.0f} | {e.median_ratio:.3f}"
    )


def report(results: Sequence[FoldResult], config: TrainConfig, command: str, wall_s: float) -> str:
    head = (
        "| held out | rows (trained on) | GNN MAPE % | GNN within 10 % | GNN within 30 % "
        "| GNN median pred/meas | analytical MAPE % | analytical within 10 % "
        "| analytical within 30 % | analytical median pred/meas |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [
        "# Learned energy regressor: leave one GPU out, leave one engine out",
        "",
        f"Made by `{command}` ({VERSION} design, {config.members} members, hidden width "
        f"{config.hidden}, correction penalty {config.correction_penalty}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {wall_s / 60:.0f} min on a shared 2-CPU "
        "machine). Energy per request (GPU energy of the whole request), ML.ENERGY rows; each "
        "fold refits the analytical cost model without its held-out group "
        "(`offline/training/grouped.py` says how).",
        "",
        head,
    ]
    for r in results:
        f = r.fold
        label = f"{f.kind} {f.group}"
        lines.append(
            f"| {label} | {r.regressor.count} ({r.train_rows}) | {_cells(r.regressor)} "
            f"| {_cells(r.analytical)} |"
        )
    lines += [
        "",
        "Read beside `models/energy_gnn_validation.md` (leave one model family out). "
        "The regressor earns its place on a grouping only where its MAPE is below the "
        "analytical model's on the same rows.",
    ]
    return "\n".join(lines) + "\n"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=Path("models/energy_gnn_grouped_validation.md"))
    parser.add_argument("--members", type=int, default=DEFAULTS.members)
    parser.add_argument("--epochs", type=int, default=DEFAULTS.epochs, help="smoke runs: fewer")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, folds_of: Callable[..., list[Fold]] | None = None) -> int:
    args = _arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    torch.set_num_threads(args.threads)
    started = time.monotonic()
    config = replace(DEFAULTS, members=args.members, epochs=args.epochs, progress=not args.quiet)
    data = FoldData.load(args.data)
    priors = load_priors(args.data)
    folds = (folds_of or (lambda d, p: gpu_folds(d, p) + engine_folds(d, p)))(data, args.data)
    results = []
    for fold in folds:
        logger.info("%s %s: %d held out", fold.kind, fold.group, int(fold.test.sum()))
        results.append(evaluate(fold, priors, config))
    command = "python -m offline.training.grouped --data ../shared/data"
    for name in ("members", "epochs"):
        if getattr(args, name) != getattr(DEFAULTS, name):
            command += f" --{name} {getattr(args, name)}"
    text = report(results, config, command, time.monotonic() - started)
    args.out.write_text(text, encoding="utf-8")
    logger.info("wrote %s", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
