"""Values with multiplicative low/high bounds, and how bounds combine.

Every carbon factor (energy, PUE, grid intensity, embodied figures, lifetime) is a `Ranged`: a
central value with `low_ratio <= 1 <= high_ratio`, its bounds being `value * low_ratio` and
`value * high_ratio`. Two rules combine them:

- a product of independent factors takes its bounds in log space, in quadrature:
  `low_ratio = exp(-sqrt(sum(ln(low_i) ** 2)))`, `high_ratio = exp(sqrt(sum(ln(high_i) ** 2)))`,
  which is exact for lognormal errors whose bounds share one coverage (here the 10th-90th
  percentile band of the fitted energy interval) and keeps the band from growing with every
  factor the way interval arithmetic would;
- a sum adds the bounds end to end (`low = sum(low_i)`), the conservative choice for terms that
  share causes (the same duration, the same request).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ranged:
    """A non-negative value [any unit] bounded by `value * low_ratio` .. `value * high_ratio`."""

    value: float
    low_ratio: float = 1.0
    high_ratio: float = 1.0

    def __post_init__(self) -> None:
        if not self.value >= 0.0:
            raise ValueError(f"value must be >= 0, got {self.value}")
        if not 0.0 < self.low_ratio <= 1.0 <= self.high_ratio < math.inf:
            raise ValueError(
                f"need 0 < low_ratio <= 1 <= high_ratio, got {self.low_ratio}, {self.high_ratio}"
            )

    @classmethod
    def from_bounds(cls, value: float, low: float, high: float) -> Ranged:
        """The value with absolute bounds `low <= value <= high` (same unit as `value`)."""
        if value == 0.0:
            return cls(0.0)
        return cls(value, low / value, high / value)

    @property
    def low(self) -> float:
        return self.value * self.low_ratio

    @property
    def high(self) -> float:
        return self.value * self.high_ratio

    def scaled(self, factor: float) -> Ranged:
        """This value times an exact, non-negative `factor` (bounds scale with it)."""
        return Ranged(self.value * factor, self.low_ratio, self.high_ratio)

    def inverse(self) -> Ranged:
        """1 / value: the low bound comes from the high one and vice versa."""
        return Ranged(1.0 / self.value, 1.0 / self.high_ratio, 1.0 / self.low_ratio)


def product(*factors: Ranged) -> Ranged:
    """The product of independent factors, bounds combined in log space in quadrature."""
    # Plain loops (this runs several times per quote); the same operations in the same order
    # as math.prod and sum of squared logs, exact factors (ratio 1, log 0) skipped.
    value, low, high = 1.0, 0.0, 0.0
    for f in factors:
        value *= f.value
        if f.low_ratio != 1.0:
            low += math.log(f.low_ratio) ** 2
        if f.high_ratio != 1.0:
            high += math.log(f.high_ratio) ** 2
    return Ranged(value, math.exp(-math.sqrt(low)), math.exp(math.sqrt(high)))


def total(*terms: Ranged) -> Ranged:
    """The sum of terms, bounds added end to end (interval arithmetic)."""
    value = low = high = 0.0
    for t in terms:
        value += t.value
        low += t.value * t.low_ratio
        high += t.value * t.high_ratio
    if value == 0.0:
        return Ranged(0.0)
    return Ranged(value, min(low / value, 1.0), max(high / value, 1.0))
