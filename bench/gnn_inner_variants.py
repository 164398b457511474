"""Inner leave-one-family-out validation (as `python -m offline.training.inner_cv`) that keeps
every ensemble member's prediction, so that ways of aggregating the members (mean or median of
the log corrections) are scored on the very same trained ensembles, and writes them to an .npz.

    python bench/gnn_inner_variants.py --data ../shared/data --set huber_delta=0.03 \
        --out /tmp/inner_delta003.npz

The training configuration defaults to the final model's (`offline.training.train.DEFAULTS`:
correction penalty 0.3, 10 members); `--set field=value` changes it. The per-fold folds (cost
model refitted without each outer family) are cached in `--folds-cache` to save the refits
between runs. `--summarise A.npz B.npz ...` prints the per-aggregation scores of earlier runs.
"""

from __future__ import annotations

import argparse
import logging
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from offline.fitting.datasets import DEFAULT_DATA_DIR
from offline.training.dataset import TrainingRow, load_training_rows
from offline.training.fit import tensors, train_ensemble
from offline.training.folds import refitted_coefficients
from offline.training.inner_cv import _parse
from offline.training.train import CHOSEN, DEFAULTS, load_priors
from offline.training.validation import Folds

logger = logging.getLogger("bench.gnn_inner_variants")
FloatArray = npt.NDArray[np.float64]


def load_folds(data: Path, cache: Path) -> Folds:
    if cache.exists():
        with cache.open("rb") as handle:
            folds: Folds = pickle.load(handle)
        return folds
    rows, _ = load_training_rows(data)
    families = sorted({r.family for r in rows})
    refitted = refitted_coefficients(data, families)
    folds = {f: load_training_rows(data, None, refitted[f])[0] for f in families}
    with cache.open("wb") as handle:
        pickle.dump(folds, handle)
    return folds


def member_log_phase(model: object, rows: list[TrainingRow]) -> FloatArray:
    """Every member's log phase energy [R, K, O]."""
    x = tensors(rows, model.normalisation, model.variant)  # type: ignore[attr-defined]
    with torch.no_grad():
        out = model.gnn(**x)  # type: ignore[attr-defined]
    return np.asarray(out.numpy(), dtype=np.float64)


def _logsumexp(a: FloatArray, axis: int = -1) -> FloatArray:
    top = a.max(axis=axis, keepdims=True)
    return np.asarray(np.log(np.exp(a - top).sum(axis=axis)) + top.squeeze(axis))


AGGREGATIONS = {
    # the shipped ServingModel: members' mean log phase energy, then the phases' sum
    "mean": lambda p: _logsumexp(p.mean(axis=1)),
    "median": lambda p: _logsumexp(np.median(p, axis=1)),
    "trimmed": lambda p: _logsumexp(np.sort(p, axis=1)[:, 1:-1].mean(axis=1)),
}
"""Member aggregations, log phase energy [R, K, O] -> log request energy [R]."""


def scores(path: Path) -> dict[str, dict[str, float]]:
    """Per aggregation: mean over outer folds of inner MAPE and within-10 %, and pooled."""
    data = np.load(path, allow_pickle=False)
    outer = data["outer"]
    log_y = np.log(data["measured_j"])
    out = {}
    for name, aggregate in AGGREGATIONS.items():
        error = np.abs(np.exp(aggregate(data["log_phase"]) - log_y) - 1.0)
        per = [error[outer == f] for f in sorted(set(outer.tolist()))]
        out[name] = {
            "mape": float(np.mean([100 * e.mean() for e in per])),
            "w10": float(np.mean([100 * (e <= 0.1).mean() for e in per])),
            "w5": float(np.mean([100 * (e <= 0.05).mean() for e in per])),
            **{
                f"{f}": float(100 * (e <= 0.1).mean())
                for f, e in zip(sorted(set(outer.tolist())), per, strict=True)
            },
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--set", action="append", default=[], help="TrainConfig field=value")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--folds-cache", type=Path, default=Path("/tmp/gnn_inner_folds.pkl"))
    parser.add_argument("--summarise", type=Path, nargs="*", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.summarise:
        for path in args.summarise:
            for name, s in scores(path).items():
                per = " ".join(f"{k}={v:.1f}" for k, v in s.items())
                print(f"{path.name:32s} {name:8s} {per}")
        return 0
    torch.set_num_threads(1)
    config = replace(DEFAULTS, progress=False, **_parse(args.set, DEFAULTS))
    folds = load_folds(args.data, args.folds_cache)
    priors = load_priors(args.data)
    outer_of, inner_of, measured, phases = [], [], [], []
    for outer, rows in folds.items():
        rest = [r for r in rows if r.family != outer]
        for inner in sorted({r.family for r in rest}):
            train = [r for r in rest if r.family != inner]
            test = [r for r in rest if r.family == inner]
            weights = priors.weights(train, CHOSEN.focused)
            model = train_ensemble(train, weights, CHOSEN, config, desc=f"-{outer} -{inner}")
            phases.append(member_log_phase(model, test))
            measured += [r.measured_j for r in test]
            outer_of += [outer] * len(test)
            inner_of += [inner] * len(test)
        logger.info("outer %s done", outer)
    np.savez(
        args.out,
        outer=np.array(outer_of),
        inner=np.array(inner_of),
        measured_j=np.array(measured),
        log_phase=np.concatenate(phases),
        config=np.array(str(config)),
    )
    for name, s in scores(args.out).items():
        logger.info("%s: %s", name, {k: round(v, 2) for k, v in s.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
