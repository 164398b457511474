"""Per-kernel totals of a phase as arrays, with a row view for the verbose breakdown."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np
import numpy.typing as npt

from service.core.graph import KernelNode
from service.core.hardware import GpuSpec
from service.core.results import Bound, KernelCost, Phase
from service.core.work import MEMORY_FIELDS, WORK_FIELDS, Work

FloatArray = npt.NDArray[np.float64]
_BOUNDS = (Bound.COMPUTE, Bound.MEMORY, Bound.NETWORK)
_COLUMN = {name: i for i, name in enumerate(WORK_FIELDS)}


class TotalsSource(Protocol):
    def totals_matrix(self) -> FloatArray: ...


@dataclass(eq=False)
class KernelTable:
    """One phase's kernels, one entry per node: times [s] are wall-clock shares, energies [J]
    those of the GPUs running the kernel (`kernel_time_s` and `kernel_gpu_j` their sums);
    counts are totalled on first use. Read-only by convention (not frozen: a frozen
    dataclass's __init__ costs more than the rest of building a table)."""

    phase: Phase
    nodes: tuple[KernelNode, ...]
    executions: FloatArray
    kernel_time_s: float
    kernel_gpu_j: float
    time_s: FloatArray
    gpu_j: FloatArray
    compute_s: FloatArray
    memory_s: FloatArray
    network_s: FloatArray
    compute_key: str
    gpu: GpuSpec
    counts: TotalsSource

    @cached_property
    def totals_matrix(self) -> FloatArray:
        """(kernels, WORK_FIELDS): each kernel's counts summed over executions and GPUs."""
        return self.counts.totals_matrix()

    @property
    def totals(self) -> list[Work]:
        """Each kernel's counts as a Work row."""
        return [Work(*row) for row in self.totals_matrix.tolist()]

    def column(self, field: str) -> FloatArray:
        """One Work field of every kernel, summed over the phase."""
        return self.totals_matrix[:, _COLUMN[field]]

    @property
    def memory_bytes(self) -> FloatArray:
        return np.asarray(self.totals_matrix[:, MEMORY_FIELDS].sum(axis=1), dtype=np.float64)

    @property
    def bounds(self) -> list[Bound]:
        limbs = np.stack([self.compute_s, self.memory_s, self.network_s], axis=1)
        return [_BOUNDS[i] for i in limbs.argmax(axis=1)]

    def rows(self) -> tuple[KernelCost, ...]:
        """The table as KernelCost rows (built on demand: the hot path never needs them)."""
        gpu = self.gpu
        tensor_ridge = gpu.ridge_point_flops_per_byte(self.compute_key)
        cuda_ridge = gpu.cuda_core_fp32_flops_per_s / gpu.memory_bandwidth_bytes_per_s
        memory = self.memory_bytes
        rows = []
        for i, (node, bound) in enumerate(zip(self.nodes, self.bounds, strict=True)):
            w = dict(zip(WORK_FIELDS, self.totals_matrix[i].tolist(), strict=True))
            ops = w["tensor_flops"] + w["cuda_core_ops"] + w["special_function_ops"]
            rows.append(
                KernelCost(
                    phase=self.phase,
                    name=node.name,
                    kind=node.kind,
                    executions=int(self.executions[i]),
                    tensor_flops=w["tensor_flops"],
                    cuda_core_ops=w["cuda_core_ops"],
                    special_function_ops=w["special_function_ops"],
                    weight_bytes=w["weight_bytes"],
                    activation_read_bytes=w["activation_read_bytes"],
                    activation_write_bytes=w["activation_write_bytes"],
                    kv_cache_read_bytes=w["kv_cache_read_bytes"],
                    kv_cache_write_bytes=w["kv_cache_write_bytes"],
                    network_bytes=w["network_bytes"],
                    time_s=float(self.time_s[i]),
                    gpu_j=float(self.gpu_j[i]),
                    bound=bound,
                    compute_precision=self.compute_key,
                    arithmetic_intensity_flops_per_byte=float(ops / memory[i])
                    if memory[i]
                    else 0.0,
                    ridge_point_flops_per_byte=tensor_ridge if w["tensor_flops"] else cuda_ridge,
                )
            )
        return tuple(rows)
