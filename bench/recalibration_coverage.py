"""Interval coverage for bench/recalibration_report.py: the rule of a calibrated quote's interval
checked on the posted rows alone, and the scored rows' coverage before and after.

The rule is judged on the posted observations only, before the scored half is looked at: the
calibration's out-of-fold residuals (ln measured / predicted, energy and total time; the same
fit `POST /v1/calibrations` made, from `observation_points` and `fit_calibration` with its
defaults) are left out one model at a time, and each rule's interval, fitted on the other
models' residuals (and the level's interval of the held-out row's quote), is checked on them:
the coverage a model the calibration has not seen gets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from offline.fitting.conformal_rules import inside_bounds
from offline.fitting.datasets import EnergyMeasurement
from service.catalog.intervals import LevelInterval, conformal_bounds
from service.db.tables import TENANT_SCOPE
from service.pricing.calibration import FitSettings, fit_calibration
from service.pricing.calibration.calibrated_intervals import (
    Residual,
    ResidualQuantiles,
    calibrated_interval,
)
from service.pricing.estimator import Estimator
from service.quotes.recalibration import observation_points

NOMINAL = (0.1, 0.9)
DEV_TENANT = "dev"
Bounds = tuple[float, float]  # log bounds of measured / quoted
Own = tuple[Bounds | None, int, int]
"""A calibration's residual quantiles: conformal log bounds (None: too few), scores, models."""
Rule = Callable[[Own, Bounds], Bounds]


def posted_fit(url: str, estimator: Estimator) -> dict[str, Any]:
    """The posted observations' out-of-fold residuals and the quantiles stored per GPU fit."""
    engine = create_engine(url)
    try:
        with Session(engine) as session:
            points, _, _ = observation_points(session, DEV_TENANT, TENANT_SCOPE, estimator)
    finally:
        engine.dispose()
    fit = fit_calibration(points, FitSettings())
    return {
        "residuals": [_residual_row(r) for r in fit.residuals],
        "quantiles": {
            f"{gpu}|{engine_id}": {q: v.to_payload() for q, v in f.quantiles.items()}
            for (gpu, engine_id), f in fit.corrections.fits.items()
        },
    }


def _residual_row(r: Residual) -> dict[str, Any]:
    return {"id": r.observation_id, "model": r.model, "quantity": r.quantity, "log": r.log_ratio}


def _level(bounds: Bounds) -> LevelInterval:
    return LevelInterval("level", "level", math.exp(bounds[0]), math.exp(bounds[1]), 0, 0, 0.0)


def own_quantiles(scores: Sequence[float], models: Sequence[str]) -> Own:
    """The calibration's quantiles of residuals `scores`, each of the model in `models`."""
    return conformal_bounds(scores, *NOMINAL), len(scores), len(set(models))


def level_rule(own: Own, level: Bounds) -> Bounds:
    """The level's interval around the moved estimate (what quotes did before)."""
    return level


def alone_rule(own: Own, level: Bounds) -> Bounds:
    """The calibration's quantiles alone wherever they exist."""
    found = own[0]
    return level if found is None else found


def wider_rule(own: Own, level: Bounds) -> Bounds:
    """Always the wider of the calibration's and the level's, per side."""
    found = own[0]
    return level if found is None else (min(found[0], level[0]), max(found[1], level[1]))


def shipped_rule(own: Own, level: Bounds) -> Bounds:
    """calibrated_interval: alone from 20 scores of 2 models, else the wider of the two."""
    found, n, groups = own
    if found is None:
        return level
    quantiles = ResidualQuantiles("x", n, groups, *NOMINAL, found[0], found[1], 0.0)
    interval = calibrated_interval(_level(level), quantiles)
    return math.log(interval.lower_ratio), math.log(interval.upper_ratio)


RULES: dict[str, Rule] = {
    "level's interval": level_rule,
    "calibration's alone": alone_rule,
    "wider of the two": wider_rule,
    "shipped: alone from 20 scores of 2 models, else the wider": shipped_rule,
}


def nested_coverage(
    residuals: Sequence[dict[str, Any]], levels: dict[str, dict[str, Bounds]], quantity: str
) -> dict[str, tuple[float, float]]:
    """Per rule, the share [%] of `quantity`'s residuals inside the interval fitted without
    their model, and the median width (high / low) of those intervals; `levels`: by
    observation id, the level's log bounds per quantity of its quote."""
    own = [r for r in residuals if r["quantity"] == quantity]
    out = {}
    for name, rule in RULES.items():
        hits, widths = [], []
        for r in own:
            others = [o for o in own if o["model"] != r["model"]]
            quantiles = own_quantiles([o["log"] for o in others], [o["model"] for o in others])
            bounds = rule(quantiles, levels[r["id"]][quantity])
            hits.append(inside_bounds(r["log"], bounds))
            widths.append(math.exp(max(bounds[1], 0.0) - min(bounds[0], 0.0)))
        widths.sort()
        median = widths[len(widths) // 2] if widths else math.nan
        out[name] = (100.0 * sum(hits) / max(len(hits), 1), median)
    return out


def level_bounds(quote: dict[str, Any]) -> dict[str, Bounds]:
    """The level's log bounds of a quote's energy, time per output token and total time (its
    `validation`)."""
    held = quote["validation"]["held_out"]
    return {
        q: (math.log(held[q]["lower_ratio"]), math.log(held[q]["upper_ratio"]))
        for q in ("energy", "tpot", "total")
    }


def share_inside(values: Sequence[float], lows: Sequence[float], highs: Sequence[float]) -> float:
    """Share [%] of measured `values` inside [low, high]."""
    hits = [lo <= v <= hi for v, lo, hi in zip(values, lows, highs, strict=True)]
    return 100.0 * sum(hits) / max(len(hits), 1)


def scored_rule_coverage(
    measured: Sequence[float],
    quoted: Sequence[float],
    levels: Sequence[Bounds],
    stored: dict[str, Any],
) -> dict[str, float]:
    """Per rule, the share [%] of `measured` inside the interval it would give the calibrated
    `quoted` values, from the `stored` quantiles (all the posted residuals) and each quote's
    level bounds `levels`: for reference only, computed after the rule was chosen."""
    lower, upper = stored["lower_log"], stored["upper_log"]
    found = None if lower is None or upper is None else (lower, upper)
    own: Own = (found, int(stored["n"]), int(stored["groups"]))
    out = {}
    for name, rule in RULES.items():
        hits = [
            inside_bounds(math.log(m / q), rule(own, level))
            for m, q, level in zip(measured, quoted, levels, strict=True)
        ]
        out[name] = 100.0 * sum(hits) / max(len(hits), 1)
    return out


def tpot_inside(quotes: list[dict[str, Any]], rows: list[EnergyMeasurement]) -> float:
    """Share of rows whose measured time per output token lies in the quote's interval [%]."""
    return share_inside(
        [m.time_per_output_token_s for m in rows],
        [q["latency"]["time_per_output_token_s_low"] for q in quotes],
        [q["latency"]["time_per_output_token_s_high"] for q in quotes],
    )


def energy_inside(quotes: list[dict[str, Any]], rows: list[EnergyMeasurement]) -> float:
    """Share of rows whose measured energy per request lies in the quote's interval [%] (one
    request each: `gpu_j` is the request's)."""
    return share_inside(
        [m.per_sequence_gpu_j for m in rows],
        [q["energy"]["gpu_j_low"] for q in quotes],
        [q["energy"]["gpu_j_high"] for q in quotes],
    )


def total_inside(quotes: list[dict[str, Any]], rows: list[EnergyMeasurement]) -> float:
    """Share of rows whose measured total time (TPOT x output tokens) lies in the quote's
    interval [%]."""
    return share_inside(
        [m.time_per_output_token_s * m.output_tokens for m in rows],
        [q["latency"]["total_s_low"] for q in quotes],
        [q["latency"]["total_s_high"] for q in quotes],
    )
