"""What a sampled power trace says: when the meter updated, how often, and its mean.

NVML refreshes a GPU's power reading at a driver-defined period, whatever rate it is sampled
at: a trace sampled every 2 ms holds each value for a whole update period. So

- an update is a sample whose value differs from the previous sample's; its time is the
  sample's time [s];
- the meter's update period is the median interval between consecutive updates [s] (None
  with fewer than two updates: no interval to take). The median ignores an update missed or
  split by the sampler's own jitter;
- the mean power of a trace is time-weighted [W]: each sample holds until the next one, so
  samples that bunch up (the sampling thread waits for the interpreter) do not weigh more.
  The last sample has no interval after it and carries no weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from statistics import median
from typing import Any


def update_times_s(t_s: Sequence[float], power_w: Sequence[float]) -> list[float]:
    """Times [s] of the samples whose value differs from the sample before."""
    return [t_s[i] for i in range(1, len(power_w)) if power_w[i] != power_w[i - 1]]


def update_period_s(t_s: Sequence[float], power_w: Sequence[float]) -> float | None:
    """Median interval [s] between consecutive updates; None with fewer than two updates."""
    times = update_times_s(t_s, power_w)
    if len(times) < 2:
        return None
    return float(median(b - a for a, b in pairwise(times)))


def time_weighted_mean_w(t_s: Sequence[float], power_w: Sequence[float]) -> float | None:
    """Mean power [W], each sample weighted by the time until the next; None when the trace
    spans no time (fewer than two samples, or all at one instant)."""
    span = t_s[-1] - t_s[0] if len(t_s) >= 2 else 0.0
    if span <= 0.0:
        return None
    weighted = sum(power_w[i] * (t_s[i + 1] - t_s[i]) for i in range(len(t_s) - 1))
    return weighted / span


def traces_by_item(
    power_samples: Mapping[str, Sequence[Any]],
) -> dict[str, tuple[list[float], list[float]]]:
    """A campaign's ``power_samples`` table (columns item, t_s, power_w) as (times [s],
    powers [W]) per item, in the order the samples were taken."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for item, t, w in zip(
        power_samples["item"], power_samples["t_s"], power_samples["power_w"], strict=True
    ):
        times, powers = out.setdefault(str(item), ([], []))
        times.append(float(t))
        powers.append(float(w))
    return out


class MeterPeriod:
    """The meter's update period as a campaign learns it [s]: the median over the periods of
    the traces observed so far (`detected_s`, None before any showed two updates), else
    `guess_s` (`period_s`), what the campaign plans with before it has measured."""

    def __init__(self, guess_s: float) -> None:
        self.guess_s = guess_s
        self._periods: list[float] = []

    def observe(self, t_s: Sequence[float], power_w: Sequence[float]) -> None:
        period = update_period_s(t_s, power_w)
        if period is not None:
            self._periods.append(period)

    @property
    def detected_s(self) -> float | None:
        return float(median(self._periods)) if self._periods else None

    @property
    def period_s(self) -> float:
        detected = self.detected_s
        return self.guess_s if detected is None else detected


def campaign_update_period_s(traces: dict[str, tuple[list[float], list[float]]]) -> float | None:
    """The meter's update period of a whole campaign [s]: the median over its traces' own
    periods (None when no trace has two updates)."""
    period = MeterPeriod(guess_s=0.0)
    for t_s, power_w in traces.values():
        period.observe(t_s, power_w)
    return period.detected_s
