"""A catalogue figure with its 10th-90th percentile band and public source."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from service.core.uncertainty import Ranged


@dataclass(frozen=True, slots=True)
class SourcedFigure:
    """`value` [the unit its field names] bounded by `low`..`high`, with the source of all three."""

    value: float
    low: float
    high: float
    source: str
    year: int | None = None

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> SourcedFigure:
        figure = cls(
            value=float(entry["value"]),
            low=float(entry["low"]),
            high=float(entry["high"]),
            source=str(entry["source"]),
            year=int(entry["year"]) if "year" in entry else None,
        )
        if not 0.0 < figure.low <= figure.value <= figure.high:
            raise ValueError(f"need 0 < low <= value <= high: {entry}")
        return figure

    def ranged(self) -> Ranged:
        return Ranged.from_bounds(self.value, self.low, self.high)


@dataclass(frozen=True, slots=True)
class RangeRatios:
    """Multiplicative band (`low_ratio` <= 1 <= `high_ratio`) of a class of figures, and why."""

    low_ratio: float
    high_ratio: float
    reason: str

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> RangeRatios:
        return cls(float(entry["low_ratio"]), float(entry["high_ratio"]), str(entry["reason"]))

    def around(self, value: float) -> Ranged:
        return Ranged(value, self.low_ratio, self.high_ratio)
