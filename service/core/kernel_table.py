"""Per-kernel totals of a phase as arrays, with a row view for the verbose breakdown."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.graph import KernelNode
from service.core.hardware import GpuSpec
from service.core.results import Bound, KernelCost, Phase
from service.core.work import WORK_FIELDS, Work

FloatArray = npt.NDArray[np.float64]
_BOUNDS = (Bound.COMPUTE, Bound.MEMORY, Bound.NETWORK)
_COLUMN = {name: i for i, name in enumerate(WORK_FIELDS)}


@dataclass(frozen=True, slots=True, eq=False)
class KernelTable:
    """One phase's kernels, one entry per node: `totals` holds each kernel's Work summed over
    executions and GPUs; times [s] are wall-clock shares, energies [J] of the GPUs running it."""

    phase: Phase
    nodes: tuple[KernelNode, ...]
    executions: list[float]
    totals: list[Work]
    time_s: list[float]
    gpu_j: list[float]
    compute_s: list[float]
    memory_s: list[float]
    network_s: list[float]
    compute_key: str
    gpu: GpuSpec

    def column(self, field: str) -> FloatArray:
        """One Work field of every kernel, summed over the phase."""
        index = _COLUMN[field]
        return np.array([work[index] for work in self.totals])

    @property
    def memory_bytes(self) -> FloatArray:
        return np.array([work.memory_bytes for work in self.totals])

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
            w = self.totals[i]._asdict()
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
                    arithmetic_intensity_flops_per_byte=ops / memory[i] if memory[i] else 0.0,
                    ridge_point_flops_per_byte=tensor_ridge if w["tensor_flops"] else cuda_ridge,
                )
            )
        return tuple(rows)
