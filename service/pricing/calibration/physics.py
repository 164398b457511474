"""The analytical model's time and energy under refitted physical coefficients.

A refit moves nine coefficients of one GPU (and engine), each as a log multiplier `theta` of
its prior value (0: the catalogue's figure):

- time: the compute limb of every kernel (the achievable fraction of the compute peaks
  divided by exp(theta)), the memory limb (of the bandwidth), the network limb, the rest of
  each kernel's time (launch, collective step latency), the host-side time per prefill and
  decode step;
- power: idle power [W], the dynamic power per unit-second of compute and of memory [W], and
  the power drawn above idle during host-side time.

With the moved limbs each kernel's time is ``max(compute, memory, network) + rest`` and its
energy ``share x min(idle x time + compute_w x compute + memory_w x memory + network_w x
network, tdp x time)``, the form of service.core.roofline.kernel_gpu_j; at theta = 0 both are
the estimate's own (physical_terms reads them off it). A quote is corrected by the ratio of
the model under the refit to the model at the prior, so a correction moves a request as its
own mix of compute, memory, host time and idle power says: a GPU whose bandwidth is
overrated slows a memory-bound decode and leaves a compute-bound prefill alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.pricing.calibration.physical_terms import PhysicalTerms

FloatArray = npt.NDArray[np.float64]

PARAMETERS: tuple[str, ...] = (
    "compute_time",
    "memory_time",
    "network_time",
    "kernel_rest_time",
    "host_time",
    "idle_power",
    "compute_power",
    "memory_power",
    "host_power",
)
"""The refitted coefficients, in the order of a theta vector (log multipliers of the prior)."""

PRIOR_SIGMA: dict[str, float] = {
    "compute_time": 0.2,
    "memory_time": 0.2,
    "network_time": 0.3,
    "kernel_rest_time": 0.3,
    "host_time": 0.3,
    "idle_power": 0.2,
    "compute_power": 0.2,
    "memory_power": 0.2,
    "host_power": 0.3,
}
"""Prior standard deviation of each log multiplier: how far a GPU's true figure may plausibly
sit from the catalogue's. 0.2 (x1.22 at one sigma) for achievable fractions of published
peaks and for power per unit, whose spread across GPUs of a generation is of that order; 0.3
for host-side and launch times and the network, which depend on the host, driver and engine
more than on the chip."""


@dataclass(frozen=True, slots=True)
class Modelled:
    """[N] GPU energy of each request [J] and its prefill and decode time [s]."""

    gpu_j: FloatArray
    prefill_s: FloatArray
    decode_s: FloatArray

    @property
    def total_s(self) -> FloatArray:
        total: FloatArray = self.prefill_s + self.decode_s
        return total


def modelled(terms: PhysicalTerms, theta: FloatArray) -> Modelled:
    """Energy and phase times of every request in `terms` under log multipliers `theta`."""
    m = np.exp(theta)
    compute = terms.compute_s * m[0]
    memory = terms.memory_s * m[1]
    network = terms.network_s * m[2]
    time_s = np.maximum(np.maximum(compute, memory), network) + terms.rest_s * m[3]
    idle_w = (terms.idle_w * m[5])[:, None, None]
    busy_j = (
        terms.compute_w[:, None, None] * m[6] * compute
        + terms.memory_w[:, None, None] * m[7] * memory
        + terms.network_w[:, None, None] * network
    )
    kernel_j = np.minimum(idle_w * time_s + busy_j, terms.tdp_w[:, None, None] * time_s)
    host_j = (terms.host_idle_j * m[5] + terms.host_dynamic_j * m[8]) * m[4]
    phase_j = (kernel_j.sum(axis=2) * terms.kernel_share + host_j).sum(axis=1)
    phase_s = time_s.sum(axis=2) + terms.overhead_s * m[4]
    return Modelled(phase_j, phase_s[:, 0], phase_s[:, 1])


@dataclass(frozen=True, slots=True)
class Factors:
    """Multipliers of one quote's GPU energy and its prefill and decode times."""

    energy: float
    prefill: float
    decode: float


def factors_many(terms: PhysicalTerms, theta: FloatArray) -> list[Factors]:
    """How the refit `theta` moves each request of `terms`: modelled(theta) / modelled(0)."""
    after = modelled(terms, theta)
    before = modelled(terms, np.zeros(len(PARAMETERS)))
    energy = _ratios(after.gpu_j, before.gpu_j)
    prefill = _ratios(after.prefill_s, before.prefill_s)
    decode = _ratios(after.decode_s, before.decode_s)
    return [Factors(*values) for values in zip(energy, prefill, decode, strict=True)]


def _ratios(after: FloatArray, before: FloatArray) -> list[float]:
    """after / before, 1 where the model has nothing (a phase of no time)."""
    safe = np.where(before > 0, before, 1.0)
    ratios: list[float] = np.where(before > 0, after / safe, 1.0).tolist()
    return ratios
