"""The evidence level behind a quote, and its intervals and `validation` block.

A case is placed at the widest level it needs, in the order vendor > gpu > engine > precision
> family: a GPU of a vendor the cost model was never fitted on is `vendor`, else a GPU it was
never fitted on is `gpu`, and so on; a case fitted on in every respect is `family` (the
leave-one-family-out residuals: conservative even for a measured family), a custom
architecture `custom`. Each level's quantiles come from residuals of cases held out the same
way (service/catalog/intervals.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from service.catalog.intervals import (
    QUANTITIES,
    EvidenceIntervals,
    LevelInterval,
    compound_log_bounds,
)

LEVELS = ("family", "custom", "precision", "engine", "gpu", "vendor")
"""Evidence levels, narrowest first."""
COMPOUNDED = ("gpu", "vendor")
"""Levels whose interval compounds with the engine level's when the version was never
measured: the GPU (vendor) and the version are two errors at once (intervals.json
`compound_rule`)."""


@dataclass(frozen=True, slots=True)
class Case:
    """What decides a quote's level: its GPU id and vendor, engine profile, weight precision
    and model family ("custom" for a custom architecture). An engine version never measured
    has `engine` "<engine>==<version>" and the profile it was priced with in `profile`
    (service/catalog/engine_versions.py); else `profile` is empty."""

    gpu: str
    vendor: str
    engine: str
    precision: str
    family: str
    profile: str = ""


def evidence_level(case: Case, fitted_on: Mapping[str, frozenset[str]]) -> str:
    """The level of `case` given what the cost model was fitted on (see the module doc)."""
    if case.vendor not in fitted_on["vendor"]:
        return "vendor"
    if case.gpu not in fitted_on["gpu"]:
        return "gpu"
    if case.engine not in fitted_on["engine"]:
        return "engine"
    if case.precision not in fitted_on["precision"]:
        return "precision"
    if case.family == "custom":
        return "custom"
    return "family"


@dataclass(frozen=True, slots=True)
class Evidence:
    """A quote's level, its interval per quantity (at the nominal `lower_quantile`..
    `upper_quantile`), and its `validation` members. Derived from them when made (so a
    `dataclasses.replace` derives them again): `validation_json`, the members serialised once,
    as every quote of the case carries them; `ratios`, each interval's `bound_ratios`, which a
    quote's values are multiplied by for their bounds."""

    level: str
    intervals: dict[str, LevelInterval]
    validation: dict[str, Any]
    lower_quantile: float
    upper_quantile: float
    ratios: dict[str, tuple[float, float]] = field(init=False)
    validation_json: orjson.Fragment = field(init=False)

    def __post_init__(self) -> None:
        ratios = {q: bound_ratios(i) for q, i in self.intervals.items()}
        object.__setattr__(self, "ratios", ratios)
        object.__setattr__(self, "validation_json", orjson.Fragment(orjson.dumps(self.validation)))


QUOTED = ("energy", "prefill", "tpot", "total")
"""The quantities a quote bounds: energy, `prefill_s`, `time_per_output_token_s` and
`decode_s`, `total_s`."""


def quoted_quantity(quantity: str, serving: bool) -> str:
    """The intervals file's quantity whose residuals bound a quote's `quantity`: a quote of a
    request joining a running server (`serving.concurrent_sequences` given) bounds its prefill
    with the measured time to first token under load; a static batch with its prompt phase."""
    return "ttft" if serving and quantity == "prefill" else quantity


def case_evidence(case: Case, known: EvidenceIntervals, serving: bool = False) -> Evidence:
    """The evidence behind `case`, a static batch or (`serving`) a request joining a running
    server: the level's intervals and the measurements backing it."""
    level = evidence_level(case, known.fitted_on)
    intervals = {q: known.interval(level, quoted_quantity(q, serving)) for q in QUOTED}
    if case.profile:
        # Priced with a profile fitted on other versions: as uncertain as an engine never
        # fitted on, and at least as uncertain as that profile's own case.
        fitted = case_evidence(replace(case, engine=case.profile, profile=""), known, serving)
        if level in COMPOUNDED:
            engine = {q: known.interval("engine", quoted_quantity(q, serving)) for q in QUOTED}
            intervals = {q: _compound(intervals[q], engine[q], known.compound) for q in QUOTED}
        intervals = {q: _envelope(intervals[q], fitted.intervals[q]) for q in QUOTED}
    backing = {
        "gpu": _backed(known, "gpu", case.gpu),
        "engine": _backed(known, "engine", case.engine),
        "precision": _backed(known, "precision", case.precision),
        "model_family": _backed(known, "family", case.family),
    }
    held_out = {q: held_out_error(i) for q, i in intervals.items()}
    validation = {"level": level, **backing, "held_out": held_out}
    return Evidence(level, intervals, validation, known.lower_quantile, known.upper_quantile)


def _compound(level: LevelInterval, engine: LevelInterval, how: str) -> LevelInterval:
    """`level`'s interval compounded `how` with the engine level's (a version never measured
    on a GPU or vendor never fitted on)."""
    if how == "alone":
        return level
    low, high = compound_log_bounds(
        (math.log(level.lower_ratio), math.log(level.upper_ratio)),
        (math.log(engine.lower_ratio), math.log(engine.upper_ratio)),
        how,
    )
    mape = max(level.mape_pct, engine.mape_pct)
    return replace(level, lower_ratio=math.exp(low), upper_ratio=math.exp(high), mape_pct=mape)


def _envelope(level: LevelInterval, other: LevelInterval) -> LevelInterval:
    """`level`'s interval widened to hold `other`'s too."""
    return replace(
        level,
        lower_ratio=min(level.lower_ratio, other.lower_ratio),
        upper_ratio=max(level.upper_ratio, other.upper_ratio),
        mape_pct=max(level.mape_pct, other.mape_pct),
    )


def held_out_error(interval: LevelInterval) -> dict[str, Any]:
    """The `held_out` member of one quantity (schemas/validation.py HeldOutErrorOut)."""
    return {
        "level": interval.fitted_level,
        "rows": interval.rows,
        "mape_pct": interval.mape_pct,
        "lower_ratio": interval.lower_ratio,
        "upper_ratio": interval.upper_ratio,
    }


def gpu_validation(gpu: str, vendor: str, known: EvidenceIntervals) -> dict[str, Any]:
    """A GPU's validation (schemas/validation.py GpuValidationOut): its level for a quote
    whose engine, precision and family were fitted on, and the measurements behind it."""
    fitted = known.fitted_on
    typical = Case(gpu, vendor, min(fitted["engine"]), "bf16", min(fitted["family"]))
    level = evidence_level(typical, fitted)
    return {
        "fitted_on": gpu in fitted["gpu"],
        "level": level,
        "measured_rows": dict(known.backing_of("gpu", gpu)),
        "held_out": {q: held_out_error(known.interval(level, q)) for q in QUANTITIES},
    }


def _backed(known: EvidenceIntervals, dimension: str, value: str) -> dict[str, Any]:
    fitted = value in known.fitted_on.get(dimension, frozenset())
    rows = dict(known.backing_of(dimension, value))
    return {"value": value, "fitted_on": fitted, "measured_rows": rows}


def bound_ratios(interval: LevelInterval) -> tuple[float, float]:
    """The ratios to a value of its low and high bounds: its interval's, widened to bracket
    the value itself (a biased level may put both ratios on one side of 1; widening keeps
    coverage)."""
    return min(interval.lower_ratio, 1.0), max(interval.upper_ratio, 1.0)
