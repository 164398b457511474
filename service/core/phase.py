"""Cost of every kernel over a whole phase, vectorised over the kernels.

Each kernel's per-execution work is a row of counts; one matrix product turns the rows into
per-unit times on the GPU's roofline. Kernels whose work grows with the context (attention in
decode) are summed over decode steps in closed form, the others are constant per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from service.core.coefficients import PowerCoefficients
from service.core.graph import KernelNode
from service.core.hardware import GpuSpec
from service.core.kernel_table import KernelTable
from service.core.results import Phase
from service.core.roofline import (
    COMPUTE_UNITS,
    STREAMING_KINDS,
    UnitRates,
    sum_affine,
    sum_max_affine,
    unit_times_s,
)
from service.core.work import WORK_FIELDS, Work

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class WorkPiece:
    """Per-execution work `base + slope * c` for every integer context c in [first, last].

    Prefill is one piece with first == last; a decode kernel that does not read the KV cache
    has no slope and the same work at every decode step.
    """

    base: Work
    slope: Work | None
    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True, slots=True)
class PhaseContext:
    """What every kernel of a phase shares: GPU, rates, power model and layout."""

    phase: Phase
    gpu: GpuSpec
    rates: UnitRates
    compute_key: str
    power: PowerCoefficients
    kernel_launch_s: float
    group_gpus: int


@lru_cache(maxsize=256)
def _seconds_per_count(rates: UnitRates) -> FloatArray:
    """Matrix (work field x unit) turning a row of counts into per-unit seconds."""
    matrix = np.zeros((len(WORK_FIELDS), 5))
    matrix[1, 0] = 1.0 / rates.tensor_flops_per_s  # padded tensor FLOPs set compute time
    matrix[2, 1] = 1.0 / rates.cuda_core_ops_per_s
    matrix[3, 2] = 1.0 / rates.special_function_ops_per_s
    matrix[4:9, 3] = 1.0 / rates.memory_bytes_per_s
    matrix[9, 4] = 1.0 / rates.network_bytes_per_s
    matrix[10, 4] = rates.collective_step_latency_s
    matrix.setflags(write=False)
    return matrix


def phase_kernel_table(
    nodes: tuple[KernelNode, ...], pieces: list[list[WorkPiece]], ctx: PhaseContext
) -> KernelTable:
    """Totals of every kernel over the phase: counts over all GPUs, time, energy and bound."""
    zero = Work()
    per_execution = np.array([p[0].base if p else zero for p in pieces], dtype=np.float64)
    executions = np.array([sum(piece.count for piece in p) for p in pieces], dtype=np.float64)
    unit_s = per_execution @ _seconds_per_count(ctx.rates)
    unit_s[:, 3] *= _memory_rate_ratios(nodes, ctx.rates)
    time_s = (unit_s.max(axis=1) + ctx.kernel_launch_s) * executions
    compute_s = unit_s[:, :COMPUTE_UNITS].max(axis=1) * executions
    memory_s = unit_s[:, 3] * executions
    network_s = unit_s[:, 4] * executions
    totals = per_execution * executions[:, None]
    for i, node_pieces in enumerate(pieces):
        if len(node_pieces) > 1 or (node_pieces and node_pieces[0].slope is not None):
            sums = _context_dependent_sums(node_pieces, ctx, nodes[i].kind in STREAMING_KINDS)
            time_s[i], compute_s[i], memory_s[i], network_s[i] = sums[:4]
            totals[i] = sums[4]
    layers = np.array([node.layers for node in nodes], dtype=np.float64)
    time_s *= layers
    compute_s *= layers
    memory_s *= layers
    network_s *= layers
    gpu = ctx.gpu
    power = ctx.power
    dynamic_share = power.compute * compute_s + power.memory * memory_s + power.network * network_s
    # Utilisation-weighted dynamic power, capped so no kernel draws more than TDP.
    dynamic_j = (gpu.tdp_w - gpu.idle_w) * np.minimum(dynamic_share, time_s)
    return KernelTable(
        phase=ctx.phase,
        nodes=nodes,
        executions=executions * layers,
        totals=totals * (layers * ctx.group_gpus)[:, None],
        time_s=time_s,
        gpu_j=ctx.group_gpus * (gpu.idle_w * time_s + dynamic_j),
        compute_s=compute_s,
        memory_s=memory_s,
        network_s=network_s,
        compute_key=ctx.compute_key,
        gpu=gpu,
    )


@lru_cache(maxsize=1024)
def _memory_rate_ratios(nodes: tuple[KernelNode, ...], rates: UnitRates) -> FloatArray:
    """Per node, streaming memory rate / the node's own memory rate (1 for streaming kernels)."""
    elementwise = rates.memory_bytes_per_s / rates.elementwise_memory_bytes_per_s
    ratios = np.array([1.0 if n.kind in STREAMING_KINDS else elementwise for n in nodes])
    ratios.setflags(write=False)
    return ratios


def _context_dependent_sums(
    pieces: list[WorkPiece], ctx: PhaseContext, streaming: bool
) -> tuple[float, float, float, float, FloatArray]:
    """(time, compute, memory, network seconds, total counts) of one kernel over its pieces."""
    time_s = compute_s = memory_s = network_s = 0.0
    total = np.zeros(len(WORK_FIELDS))
    for piece in pieces:
        base_times = unit_times_s(piece.base, ctx.rates, streaming=streaming)
        time_s += ctx.kernel_launch_s * piece.count
        total += np.asarray(piece.base) * piece.count
        if piece.slope is None:
            time_s += max(base_times) * piece.count
            compute_s += max(base_times[:COMPUTE_UNITS]) * piece.count
            memory_s += base_times[3] * piece.count
            network_s += base_times[4] * piece.count
            continue
        slope_times = unit_times_s(piece.slope, ctx.rates, streaming=streaming)
        lines = list(zip(base_times, slope_times, strict=True))
        time_s += sum_max_affine(lines, piece.first, piece.last)
        compute_s += sum_max_affine(lines[:COMPUTE_UNITS], piece.first, piece.last)
        memory_s += sum_affine(*lines[3], piece.first, piece.last)
        network_s += sum_affine(*lines[4], piece.first, piece.last)
        total += np.asarray(piece.slope) * sum_affine(0.0, 1.0, piece.first, piece.last)
    return time_s, compute_s, memory_s, network_s, total
