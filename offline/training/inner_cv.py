"""Inner leave-one-family-out validation: how design choices are decided without the held-out
family.

    python -m offline.training.inner_cv --data ../shared/data --set model_balance=1
    python -m offline.training.inner_cv --data ../shared/data --variant precision_bits=0
    python -m offline.training.inner_cv --data ../shared/data --set time_weight=0 --outer phi

For every outer fold (family F left out, the cost model refitted without F, as in
`offline.training.train`), each other family G is left out in turn of a training on the
remaining families, and predicted: F's rows are never trained on nor scored. The score of a
choice in outer fold F is the MAPE over those inner predictions; a choice is taken when it
scores better in the outer folds, so the number the report gives for F never decided it.

The base is the shipped design (`train.DEFAULTS`: served target, time weight, each outer fold
with its own inner-validated correction penalty, `train.fold_penalty`); `--set` changes it.
Energy and time per output token are both scored (the served quote against the measurement);
`criterion_pct`, their mean, decides a choice that trades one against the other (the TPOT head's
weight). `--outer` runs some outer folds only, so that they can run side by side.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from offline.fitting.datasets import DEFAULT_DATA_DIR
from offline.training.dataset import load_training_rows, log_served, log_tpot_ratio
from offline.training.fit import (
    TrainConfig,
    Variant,
    predict_log_j,
    predict_log_tpot_ratio,
    train_ensemble,
)
from offline.training.folds import refitted_coefficients
from offline.training.train import CHOSEN, DEFAULTS, fold_penalty, load_priors
from offline.training.validation import Folds, Priors

logger = logging.getLogger("offline.training.inner_cv")


def _parse(assignments: list[str], target: object) -> dict[str, Any]:
    """`name=value` strings as typed keyword arguments of the dataclass `target`."""
    types = {f.name: type(getattr(target, f.name)) for f in fields(target)}  # type: ignore[arg-type]
    out: dict[str, Any] = {}
    for text in assignments:
        name, value = text.split("=", 1)
        kind = types[name]
        out[name] = value not in ("0", "false", "False") if kind is bool else kind(value)
    return out


def _mape_pct(ratio: np.ndarray) -> float:
    """MAPE [%] of predicted / measured ratios, over the finite ones (NaN if none)."""
    finite = ratio[np.isfinite(ratio)]
    return float(100 * np.abs(finite - 1.0).mean()) if finite.size else float("nan")


def inner_scores(
    folds: Folds,
    variant: Variant,
    config: TrainConfig,
    priors: Priors,
    penalties: Mapping[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """Per outer family: energy MAPE [%], share within 10 % [%], TPOT MAPE [%] of the inner
    held-out predictions and the criterion, the mean of the two MAPEs [%]. `penalties`: the
    correction penalty of each outer fold (else `config`'s)."""
    scores = {}
    for outer, rows in folds.items():
        penalty = (penalties or {}).get(outer, config.correction_penalty)
        fold_config = replace(config, correction_penalty=penalty)  # this outer fold's only
        rest = [r for r in rows if r.family != outer]
        relative: list[float] = []
        tpot: list[float] = []
        for inner in sorted({r.family for r in rest}):
            train = [r for r in rest if r.family != inner]
            test = [r for r in rest if r.family == inner]
            weights = priors.weights(train, variant.focused)
            started = time.monotonic()
            desc = f"-{outer} -{inner}"
            model = train_ensemble(train, weights, variant, fold_config, desc=desc)
            served = log_served(test, predict_log_j(model, test))  # the quote the service gives
            ratio = np.exp(served) / np.array([r.measured_j for r in test])
            relative += np.abs(ratio - 1.0).tolist()
            tpot_ratio = np.exp(predict_log_tpot_ratio(model, test) - log_tpot_ratio(test))
            tpot += np.abs(tpot_ratio - 1.0).tolist()
            logger.info(
                "%s: %.0f s, energy MAPE %.2f %%, TPOT MAPE %.2f %%",
                desc,
                time.monotonic() - started,
                100 * np.abs(ratio - 1.0).mean(),
                _mape_pct(tpot_ratio),
            )
        error = np.array(relative)
        tpot_error = np.array(tpot)[np.isfinite(tpot)]  # rows without a decode step: none
        scores[outer] = {
            "mape_pct": float(100 * error.mean()),
            "within_10_pct": float(100 * (error <= 0.1).mean()),
            "rows": float(len(error)),
            "tpot_mape_pct": float(100 * tpot_error.mean()),
            "tpot_rows": float(len(tpot_error)),
            "criterion_pct": float(50 * (error.mean() + tpot_error.mean())),
            "correction_penalty": fold_config.correction_penalty,
        }
        logger.info("outer %s: %s", outer, scores[outer])
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--set", action="append", default=[], help="TrainConfig field=value")
    parser.add_argument("--variant", action="append", default=[], help="Variant field=value")
    parser.add_argument("--outer", default=None, help="comma-separated outer families (all)")
    parser.add_argument("--out", type=Path, default=None, help="write the scores as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    torch.set_num_threads(1)
    changes = _parse(args.set, DEFAULTS)
    config = replace(DEFAULTS, progress=False, **changes)
    variant = replace(CHOSEN, **_parse(args.variant, CHOSEN))
    rows, _ = load_training_rows(args.data)
    families = sorted({r.family for r in rows})
    outers = families if args.outer is None else args.outer.split(",")
    refitted = refitted_coefficients(args.data, outers)
    folds = {f: load_training_rows(args.data, None, refitted[f])[0] for f in outers}
    penalties = None if "correction_penalty" in changes else {f: fold_penalty(f) for f in outers}
    scores = inner_scores(folds, variant, config, load_priors(args.data), penalties)
    mean = float(np.mean([s["mape_pct"] for s in scores.values()]))
    tpot = float(np.mean([s["tpot_mape_pct"] for s in scores.values()]))
    criterion = float(np.mean([s["criterion_pct"] for s in scores.values()]))
    logger.info(
        "mean inner MAPE over outer folds: energy %.2f %%, TPOT %.2f %%, criterion %.2f %%",
        mean,
        tpot,
        criterion,
    )
    if args.out is not None:
        document = {"variant": str(variant), "config": str(config), "scores": scores}
        args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
