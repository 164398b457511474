"""The intervals of a quote priced under an active calibration: split-conformal quantiles of the
calibration's own held-out residuals.

A GPU's fit is scored by grouped k-fold (service.pricing.calibration.fit): every observation is
predicted by the calibration fitted without its model's observations. Its residuals
``ln(measured / predicted)`` (GPU energy, and total time where posted) are what a quote of
another model on that GPU and engine will miss by, so a calibrated quote's interval takes their
split-conformal quantiles (`conformal_bounds`: the finite-sample order statistics the
offline fit of the evidence levels uses), not the level's, which were measured around the
uncalibrated estimate.

With few residuals the order statistics are the extremes of a handful of points: at 0.1 / 0.9,
under 20 scores each bound is the smallest or largest score itself, and from one model only
the folds never left a model out. So the calibration's quantiles stand alone only with
`STANDALONE_ROWS` scores from `STANDALONE_GROUPS` models (the rows the offline fit asks of a
level, offline/fitting/conformal_rules.py MIN_ROWS); below that each bound is the wider of the
calibration's and the level's (never narrower than the level's: the level was measured on
many more rows, the calibration may have removed a bias the level's bounds carry but cannot
yet show a smaller spread); and where there are too few scores for the order statistics (under
9 at 0.1 / 0.9) the level's interval is kept.

Observations measure the whole request's time, not its phases: the total-time quantiles bound
`total_s`, `decode_s` and the time per output token (a decode-dominated quantity in the
requests observed); `prefill_s` keeps its level's interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from service.catalog.intervals import LevelInterval, conformal_bounds
from service.pricing.evidence import Evidence, held_out_error

STANDALONE_ROWS = 20
STANDALONE_GROUPS = 2
CALIBRATION_LEVEL = "calibration"
"""The `held_out[].level` of an interval taken from a calibration's residuals."""
RESIDUAL_OF_QUOTED = {"energy": "energy", "tpot": "total", "total": "total"}
"""Which residuals bound each of a quote's quantities (evidence.QUOTED; prefill: none)."""


@dataclass(frozen=True, slots=True)
class Residual:
    """One observation's out-of-fold residual: ln(observed / predicted by the calibration
    fitted without its fold) of `quantity` ("energy" or "total" time), its scope and model."""

    observation_id: str
    scope: tuple[str, str]
    model: str
    quantity: str
    log_ratio: float


@dataclass(frozen=True, slots=True)
class ResidualQuantiles:
    """A GPU fit's k-fold residuals of one quantity ("energy" or "total"), summarised: their
    count `n` and models `groups`, the split-conformal log bounds at (`lower_q`, `upper_q`)
    (None: too few scores), and the mean absolute percentage error they make [fraction]."""

    quantity: str
    n: int
    groups: int
    lower_q: float
    upper_q: float
    lower_log: float | None
    upper_log: float | None
    mape: float

    @property
    def stands_alone(self) -> bool:
        return self.n >= STANDALONE_ROWS and self.groups >= STANDALONE_GROUPS

    def to_payload(self) -> dict[str, Any]:
        return {
            "quantity": self.quantity,
            "n": self.n,
            "groups": self.groups,
            "lower_q": self.lower_q,
            "upper_q": self.upper_q,
            "lower_log": self.lower_log,
            "upper_log": self.upper_log,
            "mape": self.mape,
        }

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> ResidualQuantiles:
        lower, upper = data.get("lower_log"), data.get("upper_log")
        return cls(
            quantity=str(data["quantity"]),
            n=int(data["n"]),
            groups=int(data["groups"]),
            lower_q=float(data["lower_q"]),
            upper_q=float(data["upper_q"]),
            lower_log=None if lower is None else float(lower),
            upper_log=None if upper is None else float(upper),
            mape=float(data["mape"]),
        )


def residual_quantiles(
    quantity: str,
    log_ratios: Sequence[float],
    groups: Sequence[str],
    lower_q: float,
    upper_q: float,
) -> ResidualQuantiles | None:
    """The quantiles of held-out residuals `log_ratios` (ln measured / predicted), each of the
    model in `groups`; None for none."""
    if not log_ratios:
        return None
    bounds = conformal_bounds(log_ratios, lower_q, upper_q)
    mape = math.fsum(abs(math.exp(-r) - 1.0) for r in log_ratios) / len(log_ratios)
    return ResidualQuantiles(
        quantity,
        len(log_ratios),
        len(set(groups)),
        lower_q,
        upper_q,
        None if bounds is None else bounds[0],
        None if bounds is None else bounds[1],
        mape,
    )


def scope_quantiles(
    residuals: Sequence[Residual], nominal: tuple[float, float]
) -> dict[str, ResidualQuantiles]:
    """Per quantity, the split-conformal quantiles of one scope's out-of-fold `residuals`."""
    out = {}
    for quantity in ("energy", "total"):
        own = [r for r in residuals if r.quantity == quantity]
        found = residual_quantiles(
            quantity, [r.log_ratio for r in own], [r.model for r in own], *nominal
        )
        if found is not None:
            out[quantity] = found
    return out


def calibrated_interval(level: LevelInterval, own: ResidualQuantiles) -> LevelInterval:
    """The interval of a calibrated quote whose level's is `level` (see the module doc)."""
    if own.lower_log is None or own.upper_log is None:
        return level
    low, high = math.exp(own.lower_log), math.exp(own.upper_log)
    if not own.stands_alone:
        low, high = min(low, level.lower_ratio), max(high, level.upper_ratio)
    return LevelInterval(
        level.level,
        CALIBRATION_LEVEL,
        low,
        high,
        own.n,
        own.groups,
        100.0 * own.mape,
        own.lower_q,
        floored=not own.stands_alone,
    )


def calibrated_evidence(
    evidence: Evidence,
    calibration_id: str,
    n_observations: int,
    quantiles: Mapping[str, ResidualQuantiles],
) -> Evidence:
    """`evidence` of a quote moved by a calibration's active GPU fit (of `n_observations`,
    residual `quantiles` by quantity): its energy and time intervals the calibration's, and
    its `validation` naming the calibration among the measurements behind its GPU. Quantiles
    fitted at other nominal quantiles than the quote states are not used."""
    intervals = dict(evidence.intervals)
    held_out = dict(evidence.validation["held_out"])
    for quoted, residual in RESIDUAL_OF_QUOTED.items():
        own = quantiles.get(residual)
        nominal = (evidence.lower_quantile, evidence.upper_quantile)
        if own is None or quoted not in intervals or (own.lower_q, own.upper_q) != nominal:
            continue
        intervals[quoted] = calibrated_interval(intervals[quoted], own)
        held_out[quoted] = held_out_error(intervals[quoted])
    gpu = dict(evidence.validation["gpu"])
    gpu["measured_rows"] = {**gpu["measured_rows"], f"calibration {calibration_id}": n_observations}
    validation = {**evidence.validation, "gpu": gpu, "held_out": held_out}
    return replace(evidence, intervals=intervals, validation=validation)
