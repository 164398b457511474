"""Cost of every kernel over a whole phase.

Each kernel's per-execution work is turned into per-unit times on the GPU's roofline. Kernels
whose work grows with the context (attention in decode) are summed over decode steps in closed
form; the others are constant per step.
"""

from __future__ import annotations

from dataclasses import dataclass

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
from service.core.work import Work


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


def phase_kernel_table(
    nodes: tuple[KernelNode, ...], pieces: list[list[WorkPiece]], ctx: PhaseContext
) -> KernelTable:
    """Totals of every kernel over the phase: counts over all GPUs, time, energy and bound.

    Plain Python floats: with ~20 kernels a phase, numpy's per-call overhead would cost more
    than the arithmetic.
    """
    gpu, power, rates = ctx.gpu, ctx.power, ctx.rates
    dynamic_w = gpu.tdp_w - gpu.idle_w
    inv_tensor = 1.0 / rates.tensor_flops_per_s
    inv_cuda = 1.0 / rates.cuda_core_ops_per_s
    inv_sfu = 1.0 / rates.special_function_ops_per_s
    inv_network = 1.0 / rates.network_bytes_per_s
    latency = rates.collective_step_latency_s
    launch = ctx.kernel_launch_s
    group = ctx.group_gpus
    columns: tuple[list[float], ...] = ([], [], [], [], [], [], [])
    totals: list[Work] = []
    for node, node_pieces in zip(nodes, pieces, strict=True):
        streaming = node.kind in STREAMING_KINDS
        if len(node_pieces) == 1 and node_pieces[0].slope is None:
            piece = node_pieces[0]
            w = piece.base
            count = piece.count
            memory_rate = (
                rates.memory_bytes_per_s if streaming else rates.elementwise_memory_bytes_per_s
            )
            compute = max(
                w.padded_tensor_flops * inv_tensor,
                w.cuda_core_ops * inv_cuda,
                w.special_function_ops * inv_sfu,
            )
            memory = (
                w.weight_bytes
                + w.activation_read_bytes
                + w.activation_write_bytes
                + w.kv_cache_read_bytes
                + w.kv_cache_write_bytes
            ) / memory_rate
            network = w.network_bytes * inv_network + w.collective_steps * latency
            time_s = (max(compute, memory, network) + launch) * count
            compute_s, memory_s, network_s = compute * count, memory * count, network * count
            total = w.scaled(count * node.layers * group)
        else:
            time_s, compute_s, memory_s, network_s, summed = _context_dependent_sums(
                node_pieces, ctx, streaming
            )
            total = summed.scaled(node.layers * group)
        layers = node.layers
        time_s, compute_s, memory_s, network_s = (
            time_s * layers,
            compute_s * layers,
            memory_s * layers,
            network_s * layers,
        )
        share = power.compute * compute_s + power.memory * memory_s + power.network * network_s
        # Utilisation-weighted dynamic power, capped so no kernel draws more than TDP.
        gpu_j = group * (gpu.idle_w * time_s + dynamic_w * min(share, time_s))
        executions = sum(piece.count for piece in node_pieces) * layers
        for column, value in zip(
            columns, (executions, time_s, gpu_j, compute_s, memory_s, network_s, 0.0), strict=True
        ):
            column.append(value)
        totals.append(total)
    return KernelTable(
        phase=ctx.phase,
        nodes=nodes,
        executions=columns[0],
        totals=totals,
        time_s=columns[1],
        gpu_j=columns[2],
        compute_s=columns[3],
        memory_s=columns[4],
        network_s=columns[5],
        compute_key=ctx.compute_key,
        gpu=gpu,
    )


def _context_dependent_sums(
    pieces: list[WorkPiece], ctx: PhaseContext, streaming: bool
) -> tuple[float, float, float, float, Work]:
    """(time, compute, memory, network seconds, total counts) of one kernel over its pieces."""
    time_s = compute_s = memory_s = network_s = 0.0
    total = Work()
    for piece in pieces:
        base_times = unit_times_s(piece.base, ctx.rates, streaming=streaming)
        time_s += ctx.kernel_launch_s * piece.count
        total = total.plus(piece.base.scaled(piece.count))
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
        total = total.plus(piece.slope.scaled(sum_affine(0.0, 1.0, piece.first, piece.last)))
    return time_s, compute_s, memory_s, network_s, total
