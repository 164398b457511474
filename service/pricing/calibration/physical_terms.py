"""What a recalibration refits, read off one request's analytical estimate: per phase and kernel
the compute, memory and network limbs and the rest of its time, the host-side time, and how
the GPU energy is drawn over them.

The estimate already computes all of it (service.core.estimates); this module keeps the
pieces a refit of the physical coefficients moves (service.pricing.calibration.physics), so that
evaluating the model under new coefficients needs no new pass through the cost model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.estimates import WorkloadEstimates

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PhysicalTerms:
    """One request's estimate in the pieces the physical coefficients scale.

    Arrays [2 phases, kernels] (prefill, decode), all summed over the phase's executions:
    `compute_s`, `memory_s`, `network_s`: each kernel's limbs at the prior coefficients [s];
    `rest_s`: its time beyond the largest limb (launch, collective step latency) [s].
    Arrays [2]: `overhead_s` host-side time [s]; `kernel_share` GPUs drawing each kernel's power
    times the request's share of it [-]; `host_idle_j`, `host_dynamic_j` the GPU energy of the
    non-kernel time at idle power and above it [J].
    Scalars: the GPU's `idle_w` and `tdp_w` [W], the dynamic power per unit-second of compute,
    memory and network at the prior (`(tdp - idle) x fraction`) [W].
    """

    compute_s: FloatArray
    memory_s: FloatArray
    network_s: FloatArray
    rest_s: FloatArray
    overhead_s: FloatArray
    kernel_share: FloatArray
    host_idle_j: FloatArray
    host_dynamic_j: FloatArray
    idle_w: float
    tdp_w: float
    compute_w: float
    memory_w: float
    network_w: float


def physical_terms(estimates: WorkloadEstimates, j: int) -> PhysicalTerms:
    """Workload `j`'s terms from `estimates` (its GPU's power and its engine's coefficients are
    its row's)."""
    stacked = group_terms(estimates)
    kernels = len(estimates.plans.plan_of(j).nodes)
    return PhysicalTerms(
        compute_s=stacked.compute_s[j, :, :kernels].copy(),
        memory_s=stacked.memory_s[j, :, :kernels].copy(),
        network_s=stacked.network_s[j, :, :kernels].copy(),
        rest_s=stacked.rest_s[j, :, :kernels].copy(),
        overhead_s=stacked.overhead_s[j].copy(),
        kernel_share=stacked.kernel_share[j].copy(),
        host_idle_j=stacked.host_idle_j[j].copy(),
        host_dynamic_j=stacked.host_dynamic_j[j].copy(),
        idle_w=float(stacked.idle_w[j]),
        tdp_w=float(stacked.tdp_w[j]),
        compute_w=float(stacked.compute_w[j]),
        memory_w=float(stacked.memory_w[j]),
        network_w=float(stacked.network_w[j]),
    )


@dataclass(frozen=True, slots=True)
class StackedTerms:
    """Many requests' terms in arrays [N, 2, K] (kernels padded with zeros, which add neither
    time nor energy) and [N, 2], [N] for the per-phase and per-GPU figures."""

    compute_s: FloatArray
    memory_s: FloatArray
    network_s: FloatArray
    rest_s: FloatArray
    overhead_s: FloatArray
    kernel_share: FloatArray
    host_idle_j: FloatArray
    host_dynamic_j: FloatArray
    idle_w: FloatArray
    tdp_w: FloatArray
    compute_w: FloatArray
    memory_w: FloatArray
    network_w: FloatArray

    def __len__(self) -> int:
        return int(self.idle_w.shape[0])

    def take(self, rows: Sequence[int]) -> StackedTerms:
        """The terms of requests `rows` only."""
        index = np.asarray(rows, dtype=np.intp)
        return StackedTerms(*(getattr(self, f)[index] for f in self.__dataclass_fields__))


def group_terms(estimates: WorkloadEstimates) -> StackedTerms:
    """Every workload's terms of `estimates` at once ([N, ...], each with its own GPU and
    engine coefficients; kernels padded with zeros as the estimates are)."""
    arrays, rows = estimates.arrays, estimates.plans.rows
    compute = arrays.compute_s.transpose(1, 0, 2)
    memory = arrays.memory_s.transpose(1, 0, 2)
    network = arrays.network_s.transpose(1, 0, 2)
    largest = np.maximum(np.maximum(compute, memory), network)
    share = estimates.terms.share.T
    overhead_s = estimates.overhead_s.T.astype(np.float64)
    non_kernel_j = (estimates.phase_gpu_j - estimates.kernel_gpu_j).T
    host_idle_j = share * (rows.held * rows.idle_w)[:, None] * overhead_s
    dynamic = rows.tdp_w - rows.idle_w
    return StackedTerms(
        compute_s=compute,
        memory_s=memory,
        network_s=network,
        rest_s=np.maximum(arrays.time_s.transpose(1, 0, 2) - largest, 0.0),
        overhead_s=overhead_s,
        kernel_share=rows.group[:, None] * share,
        host_idle_j=host_idle_j,
        host_dynamic_j=np.maximum(non_kernel_j - host_idle_j, 0.0),
        idle_w=rows.idle_w.copy(),
        tdp_w=rows.tdp_w.copy(),
        compute_w=dynamic * rows.power_compute,
        memory_w=dynamic * rows.power_memory,
        network_w=dynamic * rows.power_network,
    )


def stack(terms: Sequence[PhysicalTerms]) -> StackedTerms:
    """`terms` as arrays over requests (see StackedTerms)."""
    n = len(terms)
    kernels = max((t.compute_s.shape[1] for t in terms), default=0)

    def padded(name: str) -> FloatArray:
        out = np.zeros((n, 2, kernels))
        for i, t in enumerate(terms):
            values = getattr(t, name)
            out[i, :, : values.shape[1]] = values
        return out

    def rows(name: str) -> FloatArray:
        return np.array([getattr(t, name) for t in terms], dtype=np.float64).reshape(n, 2)

    def scalars(name: str) -> FloatArray:
        return np.array([getattr(t, name) for t in terms], dtype=np.float64)

    return StackedTerms(
        compute_s=padded("compute_s"),
        memory_s=padded("memory_s"),
        network_s=padded("network_s"),
        rest_s=padded("rest_s"),
        overhead_s=rows("overhead_s"),
        kernel_share=rows("kernel_share"),
        host_idle_j=rows("host_idle_j"),
        host_dynamic_j=rows("host_dynamic_j"),
        idle_w=scalars("idle_w"),
        tdp_w=scalars("tdp_w"),
        compute_w=scalars("compute_w"),
        memory_w=scalars("memory_w"),
        network_w=scalars("network_w"),
    )
