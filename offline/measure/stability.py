"""Repeat a phase until its energy is stable, and report the spread.

The energy counter updates only once per meter update period, so a reading over a short span
is off by up to one period's energy. Each reading therefore runs the phase back to back until
the reading spans at least `min_span_s` (one run when 0), and its energy per run is the
counter's difference over the span divided by the runs. Readings follow one another with no
gap, each starting at the counter read that ended the one before, so the last `min_repeats`
readings together are one continuous metered span.

After `warmup` unmeasured runs, a phase takes at least `min_repeats` readings and at most
`max_repeats`; it is stable once the relative spread of the last `min_repeats` readings'
energies per run, ``(max - min) / median``, is at most `tolerance`. The reported energy and
time per run are the totals over those last readings divided by their runs, and `span_s` is
how long that continuous span lasted; the spread is reported whether or not it converged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from statistics import median

from offline.measure.meter import EnergyMeter


@dataclass(frozen=True, slots=True)
class StabilityRule:
    min_repeats: int = 3
    max_repeats: int = 10
    tolerance: float = 0.05
    warmup: int = 1
    min_span_s: float = 0.0  # shortest reading [s]: runs back to back until it lasts this


@dataclass(frozen=True, slots=True)
class PhaseEnergy:
    """One phase's GPU energy [J] and time [s] per run (over the last readings), their spread,
    the readings taken (`repeats`), the runs and the span [s] the reported figures cover, and
    every reading's energy per run (`samples_j`)."""

    gpu_j: float
    time_s: float
    spread: float
    repeats: int
    stable: bool
    samples_j: tuple[float, ...]
    runs: int = 1
    span_s: float = 0.0


def measure_phase(
    run: Callable[[], None],
    meter: EnergyMeter,
    rule: StabilityRule = StabilityRule(),
    *,
    synchronize: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
) -> PhaseEnergy:
    """Run `run` until its energy is stable (see the module doc); `synchronize` waits for the
    GPU before each counter read and each look at the clock."""
    for _ in range(rule.warmup):
        run()
    synchronize()
    readings: list[tuple[float, float, int]] = []  # (energy [J], time [s], runs)
    start_j, start_s = meter.read_j(), clock()
    while True:
        runs = 0
        while runs == 0 or clock() - start_s < rule.min_span_s:
            run()
            synchronize()
            runs += 1
        end_j, end_s = meter.read_j(), clock()
        readings.append((end_j - start_j, end_s - start_s, runs))
        start_j, start_s = end_j, end_s  # the next reading starts where this one ended
        if len(readings) < rule.min_repeats:
            continue
        last = readings[-rule.min_repeats :]
        per_run = [j / n for j, _, n in last]
        centre = median(per_run)
        spread = (max(per_run) - min(per_run)) / centre if centre > 0 else float("inf")
        if spread <= rule.tolerance or len(readings) >= rule.max_repeats:
            total_runs = sum(n for _, _, n in last)
            span_s = sum(t for _, t, _ in last)
            return PhaseEnergy(
                gpu_j=sum(j for j, _, _ in last) / total_runs,
                time_s=span_s / total_runs,
                spread=spread,
                repeats=len(readings),
                stable=spread <= rule.tolerance,
                samples_j=tuple(j / n for j, _, n in readings),
                runs=total_runs,
                span_s=span_s,
            )
