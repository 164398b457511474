"""The held-out intervals per evidence level (`data/intervals.json`, written by
`python -m offline.fitting.intervals`): split-conformal quantiles of ln(measured/predicted),
what the cost model was fitted on (which decides a quote's level), and which measurements back
each GPU, engine, precision and model family."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from service.catalog.lookup import DATA_DIR

INTERVALS_PATH = DATA_DIR / "intervals.json"
QUANTITIES = ("energy", "prefill", "ttft", "tpot", "total")
"""Per-sequence GPU energy, a static batch's prefill time (its prompt phase alone), time to first
token of a request joining a loaded server (queueing included), time per output token, whole
request time."""


@dataclass(frozen=True, slots=True)
class LevelInterval:
    """Ratios to the estimate bounding the measured value at one level for one quantity.

    `level` is the evidence level asked for; `fitted_level` the one whose residuals gave the
    ratios (a wider one when `level` had too few rows); `rows`/`groups` counted there;
    `mape_pct` the held-out mean absolute percentage error there [%]; `score_quantile` the
    lower quantile of the order statistics taken (the upper is 1 - it), chosen so that groups
    held out of the rows are covered at the nominal rate; `mirrored`: fitted on the scores and their
    mirror images about the family level's median; `floored`: widened to hold the family level's
    bounds (both chosen the same way, offline/fitting/conformal.py)."""

    level: str
    fitted_level: str
    lower_ratio: float
    upper_ratio: float
    rows: int
    groups: int
    mape_pct: float
    score_quantile: float = 0.1
    mirrored: bool = False
    floored: bool = False


COMPOUNDS = ("alone", "widest", "rss", "sum")
"""Ways to compound a level's interval with another's, narrowest first: the level's alone, their
envelope, the root of the sum of squares of their log-bounds per side, or the sum
(offline/fitting/compound_levels.py learns which holds quotes at two levels at once)."""


def compound_log_bounds(
    a: tuple[float, float], b: tuple[float, float], how: str
) -> tuple[float, float]:
    """Log-bounds `a` and `b` (of measured / estimate), each widened to bracket 0, compounded
    `how` (COMPOUNDS)."""
    lows, highs = (min(a[0], 0.0), min(b[0], 0.0)), (max(a[1], 0.0), max(b[1], 0.0))
    if how == "alone":
        return lows[0], highs[0]
    if how == "widest":
        return min(lows), max(highs)
    if how == "sum":
        return lows[0] + lows[1], highs[0] + highs[1]
    if how == "rss":
        return -math.hypot(*lows), math.hypot(*highs)
    raise ValueError(f"unknown compound rule {how!r}")


def conformal_bounds(
    scores: Sequence[float], lower_q: float, upper_q: float
) -> tuple[float, float] | None:
    """The split-conformal bounds of `scores` at nominal quantiles (`lower_q`, `upper_q`): the
    k_lo-th and k_hi-th smallest (1-based), k_lo = floor((n + 1) lower_q) and k_hi =
    ceil((n + 1) upper_q), so that a new exchangeable score falls inside with probability at
    least upper_q - lower_q; None when n is too small for either order statistic to exist."""
    n = len(scores)
    k_lo, k_hi = math.floor((n + 1) * lower_q), math.ceil((n + 1) * upper_q)
    if k_lo < 1 or k_hi > n:
        return None
    ordered = sorted(scores)
    return ordered[k_lo - 1], ordered[k_hi - 1]


@dataclass(frozen=True, slots=True)
class EvidenceIntervals:
    """The intervals file, read: nominal quantiles, fitted-on sets, intervals and backing."""

    lower_quantile: float
    upper_quantile: float
    fitted_on: Mapping[str, frozenset[str]]
    intervals: Mapping[tuple[str, str], LevelInterval]
    backing: Mapping[str, Mapping[str, Mapping[str, int]]]
    compound: str = "alone"
    """How a GPU or vendor level compounds with the engine level for a version never measured
    (COMPOUNDS)."""

    def interval(self, level: str, quantity: str) -> LevelInterval:
        return self.intervals[(level, quantity)]

    def backing_of(self, dimension: str, value: str) -> Mapping[str, int]:
        """Measured rows behind `value` of `dimension` ("gpu", "engine", "precision",
        "family"), by source; empty when none."""
        return self.backing.get(dimension, {}).get(value, {})


def intervals_from_document(document: Mapping[str, Any]) -> EvidenceIntervals:
    intervals = {
        (level, quantity): LevelInterval(level=level, **values)
        for level, by_quantity in document["levels"].items()
        for quantity, values in by_quantity.items()
    }
    return EvidenceIntervals(
        lower_quantile=float(document["lower_quantile"]),
        upper_quantile=float(document["upper_quantile"]),
        fitted_on={k: frozenset(v) for k, v in document["fitted_on"].items()},
        intervals=intervals,
        backing=document["backing"],
        compound=str(document.get("compound_rule", "alone")),
    )


@lru_cache(maxsize=2)
def load_intervals(path: Path = INTERVALS_PATH) -> EvidenceIntervals:
    return intervals_from_document(json.loads(path.read_text(encoding="utf-8")))
