"""Kernel time on a GPU's roofline, and its sum over decode steps in closed form.

A kernel's time is the largest of the times its units would need at their achievable peaks
(tensor cores, CUDA cores, special-function units, memory, interconnect) plus a fixed launch
cost. Within decode, a kernel's counts are affine in the context length c, so each unit's time
is affine in c and the kernel time is the maximum of a few lines: its sum over a range of c is
exact from the upper envelope's breakpoints, with no loop over tokens.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from service.core.coefficients import RooflineCoefficients
from service.core.hardware import GpuSpec
from service.core.work import Work

STREAMING_KINDS = frozenset(
    {
        "gemm",
        "lm_head",
        "expert_gemm",
        "router",
        "attention",
        "attention_scores",
        "attention_context",
    }
)
"""Kernels that stream large contiguous tensors (weights, KV cache) and so reach
`memory_efficiency`; every other kind moves memory at `elementwise_memory_efficiency`."""

UNIT_NAMES: tuple[str, ...] = ("tensor", "cuda_core", "special_function", "memory", "network")
COMPUTE_UNITS = 3  # the first three units are compute


@dataclass(frozen=True, slots=True)
class UnitRates:
    """Achievable rates of one GPU for one GEMM precision [op/s, B/s]."""

    tensor_flops_per_s: float
    cuda_core_ops_per_s: float
    special_function_ops_per_s: float
    memory_bytes_per_s: float
    elementwise_memory_bytes_per_s: float
    network_bytes_per_s: float
    collective_step_latency_s: float


def unit_rates(gpu: GpuSpec, compute_key: str, coeffs: RooflineCoefficients) -> UnitRates:
    """Peaks of `gpu` scaled by the achievable fractions in `coeffs`."""
    return UnitRates(
        tensor_flops_per_s=gpu.gemm_peak_flops_per_s(compute_key) * coeffs.tensor_efficiency,
        cuda_core_ops_per_s=gpu.cuda_core_fp32_flops_per_s * coeffs.cuda_core_efficiency,
        special_function_ops_per_s=gpu.special_function_ops_per_s
        * coeffs.special_function_efficiency,
        memory_bytes_per_s=gpu.memory_bandwidth_bytes_per_s * coeffs.memory_efficiency,
        elementwise_memory_bytes_per_s=gpu.memory_bandwidth_bytes_per_s
        * coeffs.elementwise_memory_efficiency,
        network_bytes_per_s=gpu.interconnect_bandwidth_bytes_per_s * coeffs.network_efficiency,
        collective_step_latency_s=coeffs.collective_step_latency_s,
    )


def unit_times_s(
    work: Work, rates: UnitRates, *, streaming: bool = True
) -> tuple[float, float, float, float, float]:
    """Seconds each unit needs for `work`: (tensor, cuda_core, special_function, memory, network).

    `streaming` picks the memory rate of streaming kernels, else that of elementwise kernels.
    """
    memory_rate = rates.memory_bytes_per_s if streaming else rates.elementwise_memory_bytes_per_s
    network = work.network_bytes / rates.network_bytes_per_s if work.network_bytes else 0.0
    return (
        work.padded_tensor_flops / rates.tensor_flops_per_s,
        work.cuda_core_ops / rates.cuda_core_ops_per_s,
        work.special_function_ops / rates.special_function_ops_per_s,
        work.memory_bytes / memory_rate,
        network + work.collective_steps * rates.collective_step_latency_s,
    )


def sum_max_affine(lines: list[tuple[float, float]], first: int, last: int) -> float:
    """Sum over integers c in [first, last] of max_i (a_i + b_i * c), exactly.

    The maximum of lines is convex and piecewise linear; between consecutive breakpoints one
    line is on top and its sum is an arithmetic series.
    """
    if last < first:
        return 0.0
    # Common case: one line is highest at both ends, hence everywhere between.
    at_first = [a + b * first for a, b in lines]
    at_last = [a + b * last for a, b in lines]
    top = at_first.index(max(at_first))
    if at_last[top] >= max(at_last):
        return sum_affine(*lines[top], first, last)
    lines = _upper_candidates(lines, first, last)
    if len(lines) == 1:
        return sum_affine(lines[0][0], lines[0][1], first, last)
    cuts = {float(first), float(last + 1)}
    for i, (a_i, b_i) in enumerate(lines):
        for a_j, b_j in lines[i + 1 :]:
            if b_i != b_j:
                x = (a_j - a_i) / (b_i - b_j)
                if first < x < last + 1:
                    cuts.add(x)
    total = 0.0
    ordered = sorted(cuts)
    for left, right in itertools.pairwise(ordered):
        lo, hi = math.ceil(left), math.ceil(right) - 1
        if hi < lo:
            continue
        mid = (lo + hi) / 2.0
        a, b = max(lines, key=lambda line: line[0] + line[1] * mid)
        count = hi - lo + 1
        total += a * count + b * (lo + hi) * count / 2.0
    return total


def _upper_candidates(
    lines: list[tuple[float, float]], first: int, last: int
) -> list[tuple[float, float]]:
    """Lines that can set the maximum on [first, last]: a line no higher than another at both
    ends never does (of identical or tying lines, the first is kept)."""
    ends = [(a + b * first, a + b * last) for a, b in lines]
    kept = []
    for i, (lo, hi) in enumerate(ends):
        dominated = any(
            o_lo >= lo and o_hi >= hi and (o_lo > lo or o_hi > hi or j < i)
            for j, (o_lo, o_hi) in enumerate(ends)
            if j != i
        )
        if not dominated:
            kept.append(lines[i])
    return kept


def sum_affine(a: float, b: float, first: int, last: int) -> float:
    """Sum over integers c in [first, last] of a + b * c."""
    if last < first:
        return 0.0
    count = last - first + 1
    return a * count + b * (first + last) * count / 2.0
