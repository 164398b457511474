"""Timing one kernel in a loop, with its GPU energy and a power trace sampled meanwhile.

The kernel is called back to back for about `loop_s` (after `warmup_s` of unmeasured calls,
which also size the loop); the loop's GPU energy is the total-energy counter's difference, its
mean power that energy over the loop's wall time (the quantity aiconfigurator's power-annotated
tables hold as ``power``), and a thread samples the board's power every `sample_period_s`
meanwhile: the trace of the loop, its percentiles and how many samples back them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class PowerMeter(Protocol):
    """An energy counter [J] and the board's power now [W] (meter.NvmlMeter)."""

    name: str

    def read_j(self) -> float: ...

    def power_w(self) -> float: ...


@dataclass(frozen=True, slots=True)
class LoopMeasurement:
    """`calls` kernel calls in `time_s` [s] drawing `energy_j` [J]; the power samples [W]
    taken at `sample_t_s` [s from the loop's start]."""

    calls: int
    time_s: float
    energy_j: float
    samples_w: tuple[float, ...]
    sample_t_s: tuple[float, ...]

    @property
    def latency_ms(self) -> float:
        return self.time_s / self.calls * 1000.0

    @property
    def power_w(self) -> float:
        """Mean power over the loop from the energy counter [W]."""
        return self.energy_j / self.time_s if self.time_s > 0 else float("nan")

    def sampled_w(self, quantile: float) -> float:
        """A quantile of the sampled power [W] (nan without samples)."""
        return float(np.quantile(self.samples_w, quantile)) if self.samples_w else float("nan")


class PowerSampler:
    """Samples `meter.power_w()` every `period_s` on a thread between start() and stop()."""

    def __init__(self, meter: PowerMeter, period_s: float, clock: Callable[[], float]) -> None:
        self._meter, self._period_s, self._clock = meter, period_s, clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.samples_w: list[float] = []
        self.sample_t_s: list[float] = []
        self._start_s = 0.0

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.sample_t_s.append(self._clock() - self._start_s)
            self.samples_w.append(self._meter.power_w())
            self._stop.wait(self._period_s)

    def start(self) -> None:
        self._start_s = self._clock()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def measure_loop(
    call: Callable[[], None],
    meter: PowerMeter,
    synchronize: Callable[[], None],
    *,
    loop_s: float = 0.8,
    warmup_s: float = 0.15,
    sample_period_s: float = 0.002,
    calls_per_run: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> LoopMeasurement:
    """Call `call` (which runs `calls_per_run` kernels) for about `loop_s` after `warmup_s`
    of warm-up, and measure the loop (see the module doc)."""
    warm, began = 0, clock()
    while warm == 0 or clock() - began < warmup_s:
        call()
        warm += 1
        if warm % 8 == 0 or warm == 1:
            synchronize()  # so the warm-up time counts finished kernels, not queued ones
    synchronize()
    per_run_s = max((clock() - began) / warm, 1e-7)
    runs = max(1, math.ceil(loop_s / per_run_s))
    sampler = PowerSampler(meter, sample_period_s, clock)
    # The counter and the clock are read while the sampling thread is not running, so that
    # it cannot take the interpreter between the two reads at either end.
    start_j, start_s = meter.read_j(), clock()
    sampler.start()
    for _ in range(runs):
        call()
    synchronize()
    sampler.stop()
    time_s, energy_j = clock() - start_s, meter.read_j() - start_j
    return LoopMeasurement(
        runs * calls_per_run,
        time_s,
        energy_j,
        tuple(sampler.samples_w),
        tuple(sampler.sample_t_s),
    )
