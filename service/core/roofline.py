"""Kernel time on a GPU's roofline, and its sum over decode steps in closed form.

A kernel's time is the largest of the times its units would need at their achievable peaks
(tensor cores, CUDA cores, special-function units, memory, interconnect) plus a fixed launch
cost. Within decode, a kernel's counts are affine in the context length c, so each unit's time
is affine in c and the kernel time is the maximum of a few lines: its sum over a range of c is
exact from the upper envelope's breakpoints, with no loop over tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np
import numpy.typing as npt

from service.core.coefficients import PowerCoefficients, RooflineCoefficients
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
        "ssd_scan",
        "selective_scan",
        "delta_rule",
        "lightning_attention",
    }
)
"""Kernels that stream large contiguous tensors (weights, KV cache, recurrent states) and so reach
`memory_efficiency`; every other kind moves memory at `elementwise_memory_efficiency`."""

UNIT_NAMES: tuple[str, ...] = ("tensor", "cuda_core", "special_function", "memory", "network")
COMPUTE_UNITS = 3  # the first three units are compute
Seconds = TypeVar("Seconds", float, npt.NDArray[np.float64])


@dataclass(frozen=True, slots=True)
class UnitRates:
    """Achievable rates of one GPU for one GEMM precision [op/s, B/s]: `network_bytes_per_s`
    of the tensor group's collectives, `pipeline_network_bytes_per_s` of the hand-offs between
    pipeline stages."""

    tensor_flops_per_s: float
    cuda_core_ops_per_s: float
    special_function_ops_per_s: float
    memory_bytes_per_s: float
    elementwise_memory_bytes_per_s: float
    network_bytes_per_s: float
    collective_step_latency_s: float
    pipeline_network_bytes_per_s: float


def unit_rates(
    gpu: GpuSpec,
    compute_key: str,
    coeffs: RooflineCoefficients,
    group: int = 1,
    pipeline: int = 1,
) -> UnitRates:
    """Peaks of `gpu` scaled by the achievable fractions in `coeffs`; the network rate is that
    of collectives over `group` GPUs (GpuSpec.collective_bandwidth_bytes_per_s), the pipeline
    rate that of hand-offs between `pipeline` stages of `group` GPUs."""
    return UnitRates(
        tensor_flops_per_s=gpu.gemm_peak_flops_per_s(compute_key) * coeffs.tensor_efficiency,
        cuda_core_ops_per_s=gpu.cuda_core_fp32_flops_per_s * coeffs.cuda_core_efficiency,
        special_function_ops_per_s=gpu.special_function_ops_per_s
        * coeffs.special_function_efficiency,
        memory_bytes_per_s=gpu.memory_bandwidth_bytes_per_s * coeffs.memory_efficiency,
        elementwise_memory_bytes_per_s=gpu.memory_bandwidth_bytes_per_s
        * coeffs.elementwise_memory_efficiency,
        network_bytes_per_s=gpu.collective_bandwidth_bytes_per_s(group) * coeffs.network_efficiency,
        collective_step_latency_s=coeffs.collective_step_latency_s,
        pipeline_network_bytes_per_s=gpu.pipeline_hop_bandwidth_bytes_per_s(group, pipeline)
        * coeffs.network_efficiency,
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


def kernel_gpu_j(
    gpu: GpuSpec,
    power: PowerCoefficients,
    time_s: Seconds,
    compute_s: Seconds,
    memory_s: Seconds,
    network_s: Seconds,
) -> Seconds:
    """Energy one GPU draws over kernels of `time_s` [J] (a kernel, or arrays of them).

    `compute_s` is the slowest compute unit's time, `memory_s` the memory time and `network_s`
    the link-busy time (without collective step latency). Utilisation-weighted dynamic power
    on top of idle, capped so no kernel draws more than TDP.
    """
    weights = (power.compute, power.memory, power.network)
    return drawn_j(
        gpu.idle_w, gpu.tdp_w - gpu.idle_w, weights, time_s, compute_s, memory_s, network_s
    )


def drawn_j(
    idle_w: float | npt.NDArray[np.float64],
    dynamic_w: float | npt.NDArray[np.float64],
    weights: tuple[
        float | npt.NDArray[np.float64],
        float | npt.NDArray[np.float64],
        float | npt.NDArray[np.float64],
    ],
    time_s: Seconds,
    compute_s: Seconds,
    memory_s: Seconds,
    network_s: Seconds,
) -> Seconds:
    """`kernel_gpu_j` from the GPU's idle power and its rise to TDP (`dynamic_w`, TDP - idle)
    [W] and the power coefficients' (compute, memory, network) weights, each a number or an
    array (one per workload row; a pass keeps its rows' TDP - idle)."""
    compute, memory, network = weights
    busy_s = compute * compute_s + memory * memory_s + network * network_s
    energy = idle_w * time_s + dynamic_w * np.minimum(busy_s, time_s)
    return cast(Seconds, energy)  # type: ignore[redundant-cast]
