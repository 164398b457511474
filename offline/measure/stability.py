"""Repeat a phase until its energy is stable, and report the spread.

A phase runs at least `min_repeats` times (after `warmup` unmeasured runs) and at most
`max_repeats`; it is stable once the relative spread of the last `min_repeats` energies,
``(max - min) / median``, is at most `tolerance`. The reported energy is the median of those
last runs; the spread is reported whether or not it converged.
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


@dataclass(frozen=True, slots=True)
class PhaseEnergy:
    """One phase's GPU energy [J] and time [s] (medians of the last runs) and their spread."""

    gpu_j: float
    time_s: float
    spread: float
    repeats: int
    stable: bool
    samples_j: tuple[float, ...]


def measure_phase(
    run: Callable[[], None],
    meter: EnergyMeter,
    rule: StabilityRule = StabilityRule(),
    *,
    synchronize: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
) -> PhaseEnergy:
    """Run `run` until its energy is stable (see the module doc); `synchronize` waits for the
    GPU before each counter read."""
    for _ in range(rule.warmup):
        run()
    synchronize()
    energies: list[float] = []
    times: list[float] = []
    while True:
        start_j, start_s = meter.read_j(), clock()
        run()
        synchronize()
        energies.append(meter.read_j() - start_j)
        times.append(clock() - start_s)
        last = energies[-rule.min_repeats :]
        if len(energies) >= rule.min_repeats:
            centre = median(last)
            spread = (max(last) - min(last)) / centre if centre > 0 else float("inf")
            if spread <= rule.tolerance or len(energies) >= rule.max_repeats:
                return PhaseEnergy(
                    gpu_j=centre,
                    time_s=median(times[-rule.min_repeats :]),
                    spread=spread,
                    repeats=len(energies),
                    stable=spread <= rule.tolerance,
                    samples_j=tuple(energies),
                )
