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
KERNEL_ARRAYS = ("compute_s", "memory_s", "network_s", "rest_s")
PHASE_ARRAYS = ("overhead_s", "kernel_share", "host_idle_j", "host_dynamic_j")
EMPTY_SHAPES = {name: (0, 2, 0) for name in KERNEL_ARRAYS} | {name: (0, 2) for name in PHASE_ARRAYS}


@dataclass(frozen=True, slots=True)
class PhysicalTerms:
    """Requests' estimates in the pieces the physical coefficients scale, as arrays over the
    requests (a single request is a group of one).

    Arrays [N, 2 phases, kernels] (prefill, decode; kernels padded with zeros, which add
    neither time nor energy), all summed over the phase's executions: `compute_s`,
    `memory_s`, `network_s`: each kernel's limbs at the prior coefficients [s]; `rest_s`: its
    time beyond the largest limb (launch, collective step latency) [s].
    Arrays [N, 2]: `overhead_s` host-side time [s]; `kernel_share` GPUs drawing each kernel's
    power times the request's share of it [-]; `host_idle_j`, `host_dynamic_j` the GPU energy of
    the non-kernel time at idle power and above it [J].
    Arrays [N]: the GPU's `idle_w` and `tdp_w` [W], the dynamic power per unit-second of compute,
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
    idle_w: FloatArray
    tdp_w: FloatArray
    compute_w: FloatArray
    memory_w: FloatArray
    network_w: FloatArray

    def __len__(self) -> int:
        return int(self.idle_w.shape[0])

    def take(self, rows: Sequence[int]) -> PhysicalTerms:
        """The terms of requests `rows` only."""
        index = np.asarray(rows, dtype=np.intp)
        return PhysicalTerms(*(getattr(self, f)[index] for f in self.__dataclass_fields__))


def physical_terms(estimates: WorkloadEstimates) -> PhysicalTerms:
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
    return PhysicalTerms(
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


def stack(groups: Sequence[PhysicalTerms]) -> PhysicalTerms:
    """`groups` as one group, in order (kernels padded with zeros to the widest)."""
    kernels = max((g.compute_s.shape[2] for g in groups), default=0)

    def joined(name: str) -> FloatArray:
        parts = [getattr(g, name) for g in groups]
        if name in KERNEL_ARRAYS:
            parts = [np.pad(a, ((0, 0), (0, 0), (0, kernels - a.shape[2]))) for a in parts]
        if not parts:  # no requests: the arrays' shapes with N = 0
            return np.zeros(EMPTY_SHAPES.get(name, (0,)))
        return np.concatenate(parts)

    return PhysicalTerms(*(joined(name) for name in PhysicalTerms.__dataclass_fields__))
