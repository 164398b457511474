"""Cost of every kernel over a whole phase, from a CostPlan and the request's basis terms.

Kernels that do not read the KV cache cost the same at every step of a phase: their unit times
are one matrix product away. Attention in decode grows with the context c; its unit times are
affine in c, and the sum over steps is exact from the upper envelope of those lines
(roofline.sum_max_affine), with no loop over tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.coefficients import PowerCoefficients
from service.core.counts import PassShape
from service.core.kernel_table import KernelTable
from service.core.plan import BASIS, CostPlan
from service.core.results import Phase
from service.core.roofline import sum_affine, sum_max_affine

FloatArray = npt.NDArray[np.float64]
_TOKENS, _LOGIT_ROWS = BASIS.index("tokens"), BASIS.index("logit_rows")


@dataclass(frozen=True, slots=True)
class ContextRange:
    """Decode's integer contexts [first, last]: step j attends to prompt + j keys."""

    first: int
    last: int
    sliding_window: int | None

    @property
    def steps(self) -> int:
        return max(0, self.last - self.first + 1)


@dataclass(frozen=True, slots=True)
class PhaseRequest:
    """The request's basis terms for one phase.

    Attributes:
        basis: BASIS values of one execution (for decode: its context-free part).
        padded: the same with tokens and logit rows padded to the GEMM tile.
        steps: executions of each kernel per layer (1 prefill, output_tokens - 1 decode).
        shape: the pass itself, for kernels counted directly.
        contexts: decode's context range (None in prefill).
        batch: sequences in the batch.
    """

    basis: tuple[float, ...]
    padded: tuple[float, ...]
    steps: int
    shape: PassShape
    contexts: ContextRange | None
    batch: int


@dataclass(frozen=True, slots=True)
class PhaseContext:
    """What every kernel of a phase shares besides the plan."""

    phase: Phase
    power: PowerCoefficients
    kernel_launch_s: float


def phase_kernel_tables(
    plan: CostPlan, requests: tuple[PhaseRequest, ...], contexts: tuple[PhaseContext, ...]
) -> tuple[KernelTable, ...]:
    """Every kernel's time, energy and bound in each phase, all phases in one set of array
    operations (numpy's per-call cost, not arithmetic, dominates at ~20 kernels)."""
    terms = np.array([r.basis + r.padded for r in requests]).T
    steps = np.array([float(r.steps) for r in requests])
    launch = np.array([c.kernel_launch_s for c in contexts])
    # Per kernel, unit (tensor, CUDA core, special function, memory, network) and phase:
    # seconds of one execution.
    unit = plan.seconds_per_unit @ terms
    scale = plan.layers[:, None] * steps
    time_s = (unit.max(axis=1) + launch) * scale
    compute_s = unit[:, :3].max(axis=1) * scale
    memory_s = unit[:, 3] * scale
    network_s = unit[:, 4] * scale
    for p, request in enumerate(requests):
        if request.contexts is None:
            continue
        for i in plan.attention:
            seconds = _decode_attention_s(plan, i, request, request.contexts, launch[p])
            layers = plan.layers[i]
            time_s[i, p], compute_s[i, p], memory_s[i, p], network_s[i, p] = (
                seconds[0] * layers,
                seconds[1] * layers,
                seconds[2] * layers,
                seconds[3] * layers,
            )
    power = contexts[0].power
    share = power.compute * compute_s + power.memory * memory_s + power.network * network_s
    gpu, group = plan.gpu, plan.shapes.group
    # Utilisation-weighted dynamic power, capped so no kernel draws more than TDP.
    gpu_j = group * (gpu.idle_w * time_s + (gpu.tdp_w - gpu.idle_w) * np.minimum(share, time_s))
    phase_time_s, phase_gpu_j = time_s.sum(axis=0).tolist(), gpu_j.sum(axis=0).tolist()
    return tuple(
        KernelTable(
            phase=ctx.phase,
            nodes=plan.nodes,
            executions=scale[:, p],
            kernel_time_s=phase_time_s[p],
            kernel_gpu_j=phase_gpu_j[p],
            time_s=time_s[:, p],
            gpu_j=gpu_j[:, p],
            compute_s=compute_s[:, p],
            memory_s=memory_s[:, p],
            network_s=network_s[:, p],
            compute_key=plan.compute_key,
            gpu=gpu,
            counts=PhaseCounts(plan, request),
        )
        for p, (request, ctx) in enumerate(zip(requests, contexts, strict=True))
    )


@dataclass(frozen=True, slots=True, eq=False)
class PhaseCounts:
    """What a KernelTable needs to total its kernels' counts when asked (not on the hot path)."""

    plan: CostPlan
    request: PhaseRequest

    def totals_matrix(self) -> FloatArray:
        """(kernels, WORK_FIELDS) counts summed over the phase's executions and all GPUs."""
        plan = self.plan
        basis_sum, padded_sum = _phase_sums(self.request)
        totals = plan.work_per_unit @ basis_sum
        totals[:, 1] = plan.work_per_unit[:, 1, :] @ padded_sum
        return totals * (plan.layers * plan.shapes.group)[:, None]


def _phase_sums(request: PhaseRequest) -> tuple[FloatArray, FloatArray]:
    """BASIS terms summed over the phase's executions: (real, with padded rows)."""
    steps = float(request.steps)
    basis_sum = np.array(request.basis) * steps
    padded_sum = np.array(request.padded) * steps
    contexts = request.contexts
    if contexts is None:
        return basis_sum, padded_sum
    batch = float(request.batch)
    contexts_sum = sum_affine(0.0, 1.0, contexts.first, contexts.last)
    window = contexts.sliding_window
    windowed_sum = contexts_sum if window is None else _capped_sum(contexts, window)
    span_sums = {
        "pairs_full": batch * contexts_sum,
        "keys_full": batch * contexts_sum,
        "pairs_sliding": batch * windowed_sum,
        "keys_sliding": batch * windowed_sum,
    }
    for term, value in span_sums.items():
        basis_sum[BASIS.index(term)] += value
        padded_sum[BASIS.index(term)] += value
    return basis_sum, padded_sum


def _capped_sum(contexts: ContextRange, window: int) -> float:
    """Sum over c in [first, last] of min(c, window)."""
    below = sum_affine(0.0, 1.0, contexts.first, min(contexts.last, window))
    above_count = max(0, contexts.last - max(contexts.first, window + 1) + 1)
    return below + window * above_count


def _decode_attention_s(
    plan: CostPlan, i: int, request: PhaseRequest, contexts: ContextRange, launch_s: float
) -> tuple[float, float, float, float]:
    """(time, compute, memory, network) seconds of one attention kernel over decode, per layer.

    Plain floats over the few non-zero coefficients: numpy's per-call cost would dominate.
    """
    variant = plan.nodes[i].operand
    batch = float(request.batch)
    terms = request.basis + request.padded
    sparse = plan.sparse_seconds_per_unit[i]
    slope_terms = plan.context_terms[variant]
    slopes = [batch * sum(c for b, c in unit if b in slope_terms) for unit in sparse]
    window = contexts.sliding_window if variant == "sliding" else None
    pieces = [(0.0, 1.0, contexts.first, contexts.last)]  # (keys offset, slope factor, range)
    if window is not None and window < contexts.last:
        pieces = [(0.0, 1.0, contexts.first, min(contexts.last, window))]
        pieces.append((float(window), 0.0, max(contexts.first, window + 1), contexts.last))
    time_s = compute_s = memory_s = network_s = 0.0
    for offset, factor, first, last in pieces:
        if last < first:
            continue
        lines = [
            (sum(c * terms[b] for b, c in unit) + offset * slope, slope * factor)
            for unit, slope in zip(sparse, slopes, strict=True)
        ]
        time_s += sum_max_affine(lines, first, last) + launch_s * (last - first + 1)
        compute_s += sum_max_affine(lines[:3], first, last)
        memory_s += sum_affine(*lines[3], first, last)
        network_s += sum_affine(*lines[4], first, last)
    return time_s, compute_s, memory_s, network_s
