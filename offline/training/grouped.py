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
- Family folds: one model family's rows held out, each with the correction penalty its own
  inner family folds chose (train.fold_penalty).
- Engine folds: one vLLM generation's rows held out (v2: vLLM 0.5.4 = `vllm-v0`, v3: vLLM 0.11
  = `vllm-v1`); with no row of that engine left to fit its host overheads and power on, its
  rows are priced with the profile the service would take for that version without its own
  (the nearest measured vLLM release: 0.5.4 -> vllm-v1, 0.11.1 -> aiconfigurator's `vllm`).
- Every fold scores the quote the service gives (the continuous reading, see
  continuous_energy) and, for reference, the static reading the network corrects.
- Serving runs (aiconfigurator's, offline.training.serving_rows; TPOT only) are rows of every
  GPU and engine fold, trained on only with `--serving-rows`: a GPU fold (H100, H200) holds out
  that GPU's runs, each engine's profile refitted without them (silicon_levels' `gpu` level);
  a serving engine's fold (vllm, sglang, trtllm) holds out its runs, priced with the default
  profile as the service prices an engine without measurements; the other folds keep them
  with the shipped profiles; a family fold holds out that family's runs, each engine's
  profile refitted without them (silicon_levels' `family` level).

The regressor's configuration (correction penalty, width, members) is the shipped one, decided
on inner family folds; nothing here is chosen by looking at these held-out results.
"""

from __future__ import annotations

import argparse
import json
import logging
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from offline.fitting.cross_validation import Refit
from offline.fitting.datasets import DEFAULT_DATA_DIR
from offline.fitting.family_folds import (
    FoldData,
    engine_of_row,
    fit_without,
    fit_without_group,
    gpu_of_row,
)
from offline.fitting.request_inputs import ENGINE_OF_SOURCE
from offline.fitting.silicon_levels import SOURCE as SERVING_SOURCE
from offline.training.baselines import analytical_log_j
from offline.training.dataset import TrainingRow, load_training_rows, log_measured, log_served
from offline.training.fit import TrainConfig, predict_log_j, predict_log_tpot_ratio, train_ensemble
from offline.training.folds import EngineCoefficients
from offline.training.serving_rows import (
    family_fold_profile,
    gpu_fold_profile,
    load_serving_rows,
    shipped_profiles,
)
from offline.training.train import CHOSEN, DEFAULTS, VERSION, fold_penalty, load_priors
from offline.training.validation import ErrorBounds, Priors, error_bounds
from service.catalog.engine_versions import choose_profile
from service.catalog.engines import COEFFICIENTS_PATH, load_engine_versions
from service.core.coefficients import CostModelCoefficients

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
    """Log predictions of the held-out rows [log J, log s] beside their measurements.

    `served`: what the service would quote (the continuous reading's analytical energy moved
    by the regressor's factor on the static reading); `static`: the regressor's static-reading
    prediction against the measurement, as the reports before energy-gnn 2026.11.26.2 scored it."""

    fold: Fold
    train_rows: int
    measured_j: FloatArray
    gnn_served_j: FloatArray
    analytical_served_j: FloatArray
    gnn_static_j: FloatArray
    analytical_static_j: FloatArray
    measured_tpot: FloatArray
    gnn_tpot: FloatArray
    analytical_tpot: FloatArray
    serving: npt.NDArray[np.bool_]  # the rows that are aiconfigurator serving runs


def engine_of(row: TrainingRow) -> str:
    return row.engine


def is_serving_run(row: TrainingRow) -> bool:
    return row.source == SERVING_SOURCE


Mask = npt.NDArray[np.bool_]


def gpu_masks(rows: Sequence[TrainingRow], gpu: str) -> tuple[Mask, Mask]:
    """(held out, trained on): `gpu`'s v2 rows and serving runs; every row on another GPU."""
    test = np.array(
        [r.gpu_id == gpu and (r.source == "mlenergy-v2" or is_serving_run(r)) for r in rows]
    )
    return test, np.array([r.gpu_id != gpu for r in rows])


def engine_masks(rows: Sequence[TrainingRow], engine: str) -> tuple[Mask, Mask]:
    """(held out, trained on): `engine`'s rows; every other row."""
    test = np.array([engine_of(r) == engine for r in rows])
    return test, ~test


def gpu_folds(data: FoldData, data_dir: Path) -> list[Fold]:
    """One fold per GPU of the v2 rows and of the serving runs (see the module doc)."""
    serving = load_serving_rows(data_dir)[0]
    serving_gpus = {r.gpu_id for r in serving}
    folds = []
    for gpu in sorted({m.gpu_id for m in data.energy if m.source == "mlenergy-v2"} | serving_gpus):
        kept = np.array(data.samples.gpu_id) != gpu
        refit = fit_without_group(data, gpu_of_row, gpu, kept, "GPU")
        engines: EngineCoefficients = {
            e: refit.model.coefficients(refit.coefficients, e) for e in refit.model.overheads
        }
        for missing in set(ML_ENERGY_ENGINES) - set(engines):  # H100 out: no v3 row is left
            engines[missing] = engines[ENGINE_OF_SOURCE["mlenergy-v2"]]  # in untested rows only
        rows, _ = load_training_rows(data_dir, engines=engines)
        if gpu in serving_gpus:  # each engine's profile refitted without the GPU
            profiles = {e: gpu_fold_profile(data_dir, e, gpu) for e in shipped_profiles()}
            rows += load_serving_rows(data_dir, profiles)[0]
        else:
            rows += serving
        folds.append(Fold("GPU", gpu, rows, *gpu_masks(rows, gpu)))
    return folds


def nearest_profile(engine: str) -> str:
    """The profile the service prices `engine`'s measured vLLM version with once that profile
    is gone (engine_versions.choose_profile, the held-out profile's versions removed)."""
    measured = {p: v for p, v in load_engine_versions().items() if p != engine}
    (version,) = load_engine_versions()[engine]
    return choose_profile("vllm", version, measured).profile


def held_out_engine_coefficients(refit: Refit, engine: str) -> CostModelCoefficients:
    """`engine`'s rows' coefficients with its own profile held out: the nearest profile's.
    A refitted ML.ENERGY profile is taken whole; aiconfigurator's `vllm` profile (fitted on
    serving runs) lends its time terms to the fold's refit of the remaining ML.ENERGY engine,
    whose host powers it keeps (the `vllm` profile carries vllm-v1's, fitted on the held-out
    rows)."""
    nearest = nearest_profile(engine)
    if nearest in refit.model.overheads:
        return refit.model.coefficients(refit.coefficients, nearest)
    (other,) = [e for e in ML_ENERGY_ENGINES if e != engine]
    fitted = refit.model.coefficients(refit.coefficients, other)
    document = json.loads(COEFFICIENTS_PATH.read_text(encoding="utf-8"))
    times = {k: v for k, v in document["engines"][nearest].items() if "power" not in k}
    return replace(fitted, roofline=replace(fitted.roofline, **times))


def engine_folds(data: FoldData, data_dir: Path) -> list[Fold]:
    """One fold per vLLM generation, priced with the nearest profile (see the module doc)."""
    folds = []
    serving_rows = load_serving_rows(data_dir)[0]
    all_samples = np.ones(len(data.samples.gpu_id), dtype=bool)
    for engine in ML_ENERGY_ENGINES:
        refit = fit_without_group(data, engine_of_row, engine, all_samples, "engine")
        (other,) = [e for e in ML_ENERGY_ENGINES if e != engine]
        engines = {
            engine: held_out_engine_coefficients(refit, engine),
            other: refit.model.coefficients(refit.coefficients, other),
        }
        rows, _ = load_training_rows(data_dir, engines=engines)
        rows += serving_rows
        folds.append(Fold("engine", engine, rows, *engine_masks(rows, engine)))
    ml_energy = load_training_rows(data_dir)[0]
    for engine in sorted(shipped_profiles()):  # a serving engine's runs held out
        rows = ml_energy + load_serving_rows(data_dir, held_out_engine=engine)[0]
        folds.append(Fold("engine", engine, rows, *engine_masks(rows, engine)))
    return folds


def family_folds(data: FoldData, data_dir: Path, only: set[str] | None = None) -> list[Fold]:
    """One fold per model family of the ML.ENERGY rows and the serving runs (those in `only`
    if given), the cost model refitted without it (as in train.py) and each serving engine's
    profile refitted without its runs (silicon_levels' `family` level)."""
    families = {r.family for r in load_training_rows(data_dir)[0]}
    families |= {r.family for r in load_serving_rows(data_dir)[0]}
    folds = []
    for family in sorted(families & (only or families)):
        refit = fit_without(data, family).model
        engines = {e: refit.coefficients(data.base, e) for e in refit.overheads}
        fold_rows, _ = load_training_rows(data_dir, engines=engines)
        profiles = {e: family_fold_profile(data_dir, e, family) for e in shipped_profiles()}
        fold_rows += load_serving_rows(data_dir, profiles)[0]
        test = np.array([r.family == family for r in fold_rows])
        folds.append(Fold("family", family, fold_rows, test, ~test))
    return folds


def evaluate(fold: Fold, priors: Priors, config: TrainConfig) -> FoldResult:
    """Train on the fold's training rows, predict its held-out rows with both methods."""
    trained = fold.train if config.serving_rows else fold.train & ~_serving_mask(fold.rows)
    train = [r for r, t in zip(fold.rows, trained, strict=True) if t]
    test = [r for r, t in zip(fold.rows, fold.test, strict=True) if t]
    weights = priors.weights(train, CHOSEN.focused)
    if fold.kind == "family":
        config = replace(config, correction_penalty=fold_penalty(fold.group))
    model = train_ensemble(train, weights, CHOSEN, config, f"-{fold.kind} {fold.group}")
    static = predict_log_j(model, test)
    with np.errstate(divide="ignore"):  # no decode step: -inf, left out of the TPOT cells
        served_tpot = np.log([r.served_tpot_s for r in test])
    return FoldResult(
        fold,
        len(train),
        log_measured(test),
        log_served(test, static),
        np.log([r.served_j for r in test]),
        static,
        analytical_log_j(test),
        np.log([r.measured_tpot_s for r in test]),
        served_tpot + predict_log_tpot_ratio(model, test),
        served_tpot,
        _serving_mask(test),
    )


def _serving_mask(rows: Sequence[TrainingRow]) -> Mask:
    return np.array([is_serving_run(r) for r in rows], dtype=bool)


def _cells(e: ErrorBounds) -> str:
    if e.count == 0:  # serving runs have no measured energy
        return "-"
    return f"{e.mape_pct:.1f} / {e.within_10_pct:.0f} / {e.within_30_pct:.0f}"


def _pooled(results: Sequence[FoldResult], name: str) -> FloatArray:
    return np.concatenate([getattr(r, name) for r in results])


QUANTITIES = (
    ("energy (served)", "measured_j", "gnn_served_j", "analytical_served_j"),
    ("TPOT (served)", "measured_tpot", "gnn_tpot", "analytical_tpot"),
    ("energy (static reading)", "measured_j", "gnn_static_j", "analytical_static_j"),
)


def _rows_of(result: FoldResult, serving: bool) -> FoldResult:
    """`result` restricted to its serving runs (`serving`) or to its ML.ENERGY rows."""
    keep = result.serving == serving
    arrays = {
        name: getattr(result, name)[keep]
        for name in FoldResult.__dataclass_fields__
        if name not in ("fold", "train_rows")
    }
    return replace(result, **arrays)


def _line(label: str, results: Sequence[FoldResult]) -> str:
    rows = len(_pooled(results, "measured_j"))
    cells = []
    for _, measured, gnn, analytical in QUANTITIES:
        m = _pooled(results, measured)
        known = np.isfinite(_pooled(results, analytical)) & np.isfinite(m)
        cells += [_cells(error_bounds(_pooled(results, gnn)[known], m[known])),
                  _cells(error_bounds(_pooled(results, analytical)[known], m[known]))]  # fmt: skip
    return f"| {label} | {rows} | " + " | ".join(cells) + " |"


def report(results: Sequence[FoldResult], config: TrainConfig, command: str, wall_s: float) -> str:
    head = "| held out | rows | " + " | ".join(f"{q} GNN | {q} analytical" for q, *_ in QUANTITIES)
    lines = [
        "# Learned regressor: leave one family, GPU, engine out",
        "",
        f"Made by `{command}` ({VERSION} design, {config.members} members, hidden width "
        f"{config.hidden}, correction penalty {config.correction_penalty} (family folds: "
        f"their inner-validated penalty), served target {config.served_target}, time weight "
        f"{config.time_weight}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {wall_s / 60:.0f} min "
        "on a shared 2-CPU machine). ML.ENERGY rows; each fold refits the analytical cost "
        "model without its held-out group (`offline/training/grouped.py` says how). Cells: "
        "MAPE % / within 10 % / within 30 %. `served`: the quote the service gives (continuous "
        "reading; with the regressor, its factor on the static reading applied to it); "
        "`static reading`: the regressor's static-reading prediction against the measurement, "
        "beside the static analytical estimate (how reports before energy-gnn 2026.11.26.2 "
        "scored it). Serving runs: aiconfigurator's aggregated H100/H200 runs (vLLM, SGLang, "
        "TensorRT-LLM), TPOT only, priced with their engine's profile refitted without the "
        "fold's group (a held-out serving engine: the default profile); trained on with "
        f"`--serving-rows` only (this run: {config.serving_rows}).",
        "",
        head + " |",
        "|---|---|" + "---|" * (2 * len(QUANTITIES)),
    ]
    for kind in ("family", "GPU", "engine"):
        for serving, rows in ((False, "ML.ENERGY"), (True, "serving runs")):
            chosen = [s for r in results if r.fold.kind == kind for s in [_rows_of(r, serving)]]
            chosen = [r for r in chosen if len(r.measured_tpot)]
            if chosen:
                lines.append(_line(f"**{kind} out, pooled, {rows}**", chosen))
                lines += [_line(f"{kind} {r.fold.group}, {rows}", [r]) for r in chosen]
    lines += [
        "",
        "The regressor earns its place on a grouping only where its served MAPE is below the "
        "analytical model's on the same rows.",
    ]
    return "\n".join(lines) + "\n"


def _write_raw(path: Path, results: Sequence[FoldResult]) -> None:
    """Pickle `results` without their rows (features): what the report reads (--merge)."""
    light = [replace(r, fold=replace(r.fold, rows=[])) for r in results]
    path.write_bytes(pickle.dumps(light))


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=Path("models/energy_gnn_grouped_validation.md"))
    parser.add_argument("--members", type=int, default=DEFAULTS.members)
    parser.add_argument("--epochs", type=int, default=DEFAULTS.epochs, help="smoke runs: fewer")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--splits", default="family,GPU,engine", help="comma-separated")
    parser.add_argument("--time-weight", type=float, default=DEFAULTS.time_weight)
    parser.add_argument("--static-target", action="store_true", help="learn measured_j")
    parser.add_argument(
        "--serving-rows", action="store_true", help="also train on the serving runs (TPOT)"
    )
    parser.add_argument("--families", default=None, help="comma-separated: these family folds")
    parser.add_argument(
        "--serving-weight", type=float, default=1.0, help="x each serving run's row weight"
    )
    parser.add_argument("--groups", default=None, help="comma-separated: these folds, in order")
    parser.add_argument("--raw", type=Path, default=None, help="also pickle the fold results")
    parser.add_argument("--merge", type=Path, nargs="*", default=None, help="pickled results")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, folds_of: Callable[..., list[Fold]] | None = None) -> int:
    args = _arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    torch.set_num_threads(args.threads)
    started = time.monotonic()
    config = replace(
        DEFAULTS,
        members=args.members,
        epochs=args.epochs,
        progress=not args.quiet,
        time_weight=args.time_weight,
        served_target=not args.static_target,
        serving_rows=args.serving_rows,
        serving_weight=args.serving_weight,
    )
    data = FoldData.load(args.data)
    priors = load_priors(args.data)
    if args.merge:  # one report from runs split over processes (a shared machine's cores)
        merged = [r for path in args.merge for r in pickle.loads(path.read_bytes())]
        text = report(merged, config, "merged: " + " ".join(map(str, args.merge)), 0.0)
        args.out.write_text(text, encoding="utf-8")
        return 0
    only = None if args.families is None else set(args.families.split(","))
    makers = {
        "family": lambda d, p: family_folds(d, p, only),
        "GPU": gpu_folds,
        "engine": engine_folds,
    }
    splits = args.splits.split(",")
    folds = (folds_of or (lambda d, p: [f for k in splits for f in makers[k](d, p)]))(
        data, args.data
    )
    if args.groups is not None:
        order = args.groups.split(",")
        folds = sorted((f for f in folds if f.group in order), key=lambda f: order.index(f.group))
    results = []
    for fold in folds:
        logger.info("%s %s: %d held out", fold.kind, fold.group, int(fold.test.sum()))
        results.append(evaluate(fold, priors, config))
        if args.raw is not None:  # after every fold: a long run stopped early keeps its folds
            _write_raw(args.raw, results)
    command = "python -m offline.training.grouped --data ../shared/data"
    command += f" --time-weight {args.time_weight}" + " --static-target" * args.static_target
    command += " --serving-rows" * args.serving_rows
    if args.serving_weight != 1.0:
        command += f" --serving-weight {args.serving_weight:g}"
    if args.splits != "family,GPU,engine":
        command += f" --splits {args.splits}"
    for name in ("members", "epochs"):
        if getattr(args, name) != getattr(DEFAULTS, name):
            command += f" --{name} {getattr(args, name)}"
    if args.families is not None:
        command += f" --families {args.families}"
    if args.groups is not None:
        command += f" --groups {args.groups}"
    text = report(results, config, command, time.monotonic() - started)
    args.out.write_text(text, encoding="utf-8")
    logger.info("wrote %s", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
