"""Cost of every kernel over a whole phase, from a CostPlan and the request's basis terms.

Kernels that do not read the KV cache cost the same at every step of a phase: their unit times
are one matrix product away. Attention in decode grows with the context c; its unit times are
affine in c, and the sum over steps is exact from the upper envelope of those lines
(roofline.sum_max_affine), with no loop over tokens.

This is the one-request path: at ~20 kernels numpy's per-call cost, not arithmetic, sets its
time, so both phases go through each array operation together and the few decode-attention
lines are plain floats. Many requests at once go through service.core.batch_phase.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.coefficients import PowerCoefficients
from service.core.kernel_table import KernelTable
from service.core.plan import BASIS, CostPlan
from service.core.results import Phase
from service.core.roofline import sum_affine, sum_max_affine

FloatArray = npt.NDArray[np.float64]
_PHASES = (Phase.PREFILL, Phase.DECODE)


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
        padded: the same with tokens, logit rows and expert rows padded to the GEMM tile.
        steps: executions of each kernel per layer (1 prefill, output_tokens - 1 decode).
        contexts: decode's context range (None in prefill).
        batch: sequences in the batch.
    """

    basis: tuple[float, ...]
    padded: tuple[float, ...]
    steps: int
    contexts: ContextRange | None
    batch: int


def phase_kernel_tables(
    plan: CostPlan,
    requests: tuple[PhaseRequest, PhaseRequest],
    launch_s: tuple[float, float],
    power: PowerCoefficients,
) -> tuple[KernelTable, KernelTable]:
    """Every kernel's time, energy and bound in prefill and decode."""
    prefill, decode = requests
    terms = np.array([prefill.basis + prefill.padded, decode.basis + decode.padded]).T
    kernels = len(plan.nodes)
    # Per unit (tensor, CUDA core, special function, memory, network), kernel and phase:
    # seconds of one execution.
    unit = (plan.unit_major_seconds @ terms).reshape(5, kernels, 2)
    tensor, cuda_core, special, memory, network = unit
    compute = np.maximum(np.maximum(tensor, cuda_core), special)
    scale = plan.layers[:, None] * np.array([float(prefill.steps), float(decode.steps)])
    time_s = (np.maximum(np.maximum(compute, memory), network) + launch_s) * scale
    compute_s = compute * scale
    memory_s = memory * scale
    # The network limb is link-busy time: a collective's step latency counts in its time but
    # not in the power share (the GPUs wait on flags, links idle).
    network_s = (network - plan.latency_seconds @ terms) * scale
    contexts = decode.contexts
    if contexts is not None and decode.steps > 0:
        intercepts = unit[:, :, 1].T.tolist()
        for i in plan.attention:
            seconds = _decode_attention_s(
                plan, i, intercepts[i], decode.batch, contexts, launch_s[1]
            )
            layers = plan.layers[i]
            time_s[i, 1], compute_s[i, 1], memory_s[i, 1], network_s[i, 1] = (
                seconds[0] * layers,
                seconds[1] * layers,
                seconds[2] * layers,
                seconds[3] * layers,
            )
    share = power.compute * compute_s + power.memory * memory_s + power.network * network_s
    gpu, group = plan.gpu, plan.shapes.group
    # Utilisation-weighted dynamic power, capped so no kernel draws more than TDP.
    gpu_j = group * (gpu.idle_w * time_s + (gpu.tdp_w - gpu.idle_w) * np.minimum(share, time_s))
    phase_time_s, phase_gpu_j = time_s.sum(axis=0).tolist(), gpu_j.sum(axis=0).tolist()
    counts = RequestCounts(plan, requests)
    prefill_table, decode_table = (
        KernelTable(
            phase=_PHASES[p],
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
            counts=PhaseCounts(counts, p),
        )
        for p in (0, 1)
    )
    return prefill_table, decode_table


@dataclass(eq=False)
class RequestCounts:
    """Both phases' per-kernel counts of a request, totalled together when first asked (the
    hot path never asks; the regressor's features do)."""

    plan: CostPlan
    requests: tuple[PhaseRequest, PhaseRequest]
    _totals: FloatArray | None = None

    def totals(self) -> FloatArray:
        """[2 phases, kernels, WORK_FIELDS] counts summed over executions and all GPUs."""
        if self._totals is None:
            sums = [_phase_sums(request) for request in self.requests]
            basis_sum = np.array([real for real, _ in sums])
            padded_sum = np.array([padded for _, padded in sums])
            self._totals = self.plan.count_totals(basis_sum, padded_sum)
        return self._totals


@dataclass(frozen=True, slots=True)
class PhaseCounts:
    """One phase's view of a RequestCounts (a KernelTable's counts source)."""

    request: RequestCounts
    phase: int

    def totals_matrix(self) -> FloatArray:
        """(kernels, WORK_FIELDS) counts summed over the phase's executions and all GPUs."""
        result: FloatArray = self.request.totals()[self.phase]
        return result


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
    plan: CostPlan,
    i: int,
    intercepts: list[float],
    batch: int,
    contexts: ContextRange,
    launch_s: float,
) -> tuple[float, float, float, float]:
    """(time, compute, memory, network) seconds of one attention kernel over decode, per layer.

    `intercepts`: each unit's seconds of one step without the context's part. Plain floats:
    numpy's per-call cost would dominate on five lines.
    """
    slopes = [batch * per_key for per_key in plan.seconds_per_context_key[i]]
    window = contexts.sliding_window if plan.nodes[i].operand == "sliding" else None
    pieces = [(0.0, 1.0, contexts.first, contexts.last)]  # (keys offset, slope factor, range)
    if window is not None and window < contexts.last:
        pieces = [(0.0, 1.0, contexts.first, min(contexts.last, window))]
        pieces.append((float(window), 0.0, max(contexts.first, window + 1), contexts.last))
    time_s = compute_s = memory_s = network_s = 0.0
    for offset, factor, first, last in pieces:
        if last < first:
            continue
        lines = [
            (a + offset * slope, slope * factor)
            for a, slope in zip(intercepts, slopes, strict=True)
        ]
        time_s += sum_max_affine(lines, first, last) + launch_s * (last - first + 1)
        compute_s += sum_max_affine(lines[:3], first, last)
        memory_s += sum_affine(*lines[3], first, last)
        network_s += sum_affine(*lines[4], first, last)
    return time_s, compute_s, memory_s, network_s
