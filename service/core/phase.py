"""Every kernel's time and energy in both phases for many workloads at once, from a CostPlan.

Kernels that do not read the KV cache cost the same at every step of a phase: one matrix product
over all workloads gives their unit times. Decode attention grows with the context c; its unit
times are affine in c and their maximum is summed over the steps exactly from the lines' upper
envelope (service.core.envelope), for all workloads in the same array operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.coefficients import PowerCoefficients
from service.core.envelope import sum_affine_many, sum_max_affine_many
from service.core.plan import CostPlan
from service.core.terms import WorkloadTerms

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PhaseArrays:
    """[2 phases, N workloads, kernels] totals over each phase: time [s] (wall-clock share),
    its compute, memory and network limbs [s], GPU energy [J], executions."""

    time_s: FloatArray
    compute_s: FloatArray
    memory_s: FloatArray
    network_s: FloatArray
    gpu_j: FloatArray
    executions: FloatArray


def phase_arrays(
    plan: CostPlan, terms: WorkloadTerms, launch_s: tuple[float, float], power: PowerCoefficients
) -> PhaseArrays:
    """Per-kernel totals of both phases of every workload in `terms`."""
    both = np.concatenate([terms.basis, terms.padded], axis=2)  # [2, N, 2 x BASIS]
    kernels = len(plan.nodes)
    unit = (both @ plan.unit_major_seconds.T).reshape(2, -1, 5, kernels).transpose(0, 1, 3, 2)
    launch = np.array(launch_s)[:, None, None]
    scale = terms.steps[..., None] * plan.layers  # [2, N, K]
    time_s = (unit.max(axis=3) + launch) * scale
    compute_s = unit[..., :3].max(axis=3) * scale
    memory_s = unit[..., 3] * scale
    # Link-busy time only: collective step latency is in time_s, not in the power share.
    latency = both @ plan.latency_seconds.T  # [2, N, K]
    network_s = (unit[..., 4] - latency) * scale
    for i in plan.attention:
        seconds = _decode_attention_s(plan, i, terms, unit[1, :, i, :], launch_s[1])
        for array, value in zip((time_s, compute_s, memory_s, network_s), seconds, strict=True):
            array[1, :, i] = value * plan.layers[i]
    share = power.compute * compute_s + power.memory * memory_s + power.network * network_s
    gpu, group = plan.gpu, plan.shapes.group
    # Utilisation-weighted dynamic power, capped so no kernel draws more than TDP.
    gpu_j = group * (gpu.idle_w * time_s + (gpu.tdp_w - gpu.idle_w) * np.minimum(share, time_s))
    return PhaseArrays(time_s, compute_s, memory_s, network_s, gpu_j, scale)


def _decode_attention_s(
    plan: CostPlan, i: int, terms: WorkloadTerms, intercepts: FloatArray, launch_s: float
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """[N] (time, compute, memory, network) seconds of attention kernel `i` over decode, per
    layer. `intercepts` [N, units]: one step's unit times without the context's part."""
    per_key = np.array(plan.seconds_per_context_key[i])  # [units] s per sequence and key
    slopes = terms.batch[:, None] * per_key
    sliding = plan.nodes[i].operand == "sliding"
    window = plan.arch.sliding_window_tokens if sliding else None
    first, last = terms.first, terms.last
    pieces = [(intercepts, slopes, first, last)]
    if window is not None:  # beyond the window the context stops growing
        flat = intercepts + window * slopes
        pieces = [
            (intercepts, slopes, first, np.minimum(last, window)),
            (flat, np.zeros_like(slopes), np.maximum(first, window + 1.0), last),
        ]
    time_s = compute_s = memory_s = network_s = np.zeros_like(first)
    for a, b, lo, hi in pieces:
        count = np.maximum(hi - lo + 1.0, 0.0)
        time_s = time_s + sum_max_affine_many(a, b, lo, hi) + launch_s * count
        compute_s = compute_s + sum_max_affine_many(a[:, :3], b[:, :3], lo, hi)
        memory_s = memory_s + sum_affine_many(a[:, 3], b[:, 3], lo, hi)
        network_s = network_s + sum_affine_many(a[:, 4], b[:, 4], lo, hi)
    return time_s, compute_s, memory_s, network_s
