"""Hand-built GPUs, coefficients and shortcuts shared by the core tests.

Nothing here depends on fitted values: the roofline is IDEAL_ROOFLINE (published peaks, no
overheads, tile 1) unless a test builds its own, and GPUs that a test's numbers rest on are
written out by hand.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from service.catalog import load_gpu_catalog, load_model_catalog
from service.core.architecture import ModelArchitecture
from service.core.coefficients import (
    IDEAL_ROOFLINE,
    CostModelCoefficients,
    EnergyInterval,
    PowerCoefficients,
)
from service.core.dtypes import DType
from service.core.estimate import estimate_request
from service.core.hardware import GpuSpec
from service.core.results import KernelCost, PhaseCost, RequestEstimate
from service.core.workload import Deployment, Parallelism, Precision, Workload

# compute + memory + network < 1, so the TDP cap on dynamic power never binds.
ONE_LAYER_DENSE = ModelArchitecture(
    hidden_size=1024,
    num_layers=1,
    num_attention_heads=8,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=4096,
    vocab_size=1000,
)
"""A one-layer dense model small enough that per-step costs (overheads, latencies) dominate."""

POWER = PowerCoefficients(
    compute=0.5, memory=0.3, network=0.1, host_overhead=0.0, host_per_sequence=0.0
)
INTERVAL = EnergyInterval(low_ratio=0.7, high_ratio=1.3, lower_quantile=0.1, upper_quantile=0.9)
IDEAL = CostModelCoefficients(
    version="test", roofline=IDEAL_ROOFLINE, power=POWER, energy_interval=INTERVAL
)
REALISTIC_ROOFLINE = dataclasses.replace(
    IDEAL_ROOFLINE,
    tensor_efficiency=0.7,
    cuda_core_efficiency=0.5,
    special_function_efficiency=0.5,
    memory_efficiency=0.8,
    network_efficiency=0.7,
    kernel_launch_s=4e-6,
    collective_step_latency_s=8e-6,
    prefill_overhead_s=5e-3,
    decode_step_overhead_s=4e-3,
    gemm_tile_m=64,
)
"""Below-peak efficiencies, overheads and 64-row tiles (made up, not fitted)."""
REALISTIC = dataclasses.replace(IDEAL, roofline=REALISTIC_ROOFLINE)

A100_1_5TB = GpuSpec(
    id="A100-test",
    tensor_dense_flops_per_s={"bf16": 312e12, "fp16": 312e12},
    cuda_core_fp32_flops_per_s=19.5e12,
    special_function_ops_per_s=2.4e12,
    memory_bytes=80e9,
    memory_bandwidth_bytes_per_s=1.5e12,
    interconnect_bandwidth_bytes_per_s=300e9,
    tdp_w=400.0,
    idle_w=50.0,
    interconnect_domain_gpus=8,
    scale_out_bandwidth_bytes_per_s=25e9,
)
"""An A100 as in the seed case: 312 TFLOP/s dense fp16/bf16, 1.5 TB/s."""

FP16 = Precision(weights=DType.FP16, activations=DType.FP16, kv_cache=DType.FP16)
BF16 = Precision()


def catalog_arch(model_id: str) -> ModelArchitecture:
    return load_model_catalog().get(model_id).require_architecture()


def catalog_gpu(gpu_id: str) -> GpuSpec:
    return load_gpu_catalog().get(gpu_id).spec


def deployment(
    gpu: GpuSpec,
    *,
    tensor: int = 1,
    expert: int = 1,
    pipeline: int = 1,
    precision: Precision = BF16,
    flash: bool = True,
) -> Deployment:
    return Deployment(gpu, Parallelism(tensor, expert, pipeline), precision, flash_attention=flash)


def estimate(
    arch: ModelArchitecture,
    batch: int,
    prompt: int,
    output: int,
    dep: Deployment,
    coefficients: CostModelCoefficients = IDEAL,
    *,
    check_memory: bool = True,
) -> RequestEstimate:
    workload = Workload(batch, prompt, output)
    return estimate_request(arch, workload, dep, coefficients, check_memory=check_memory)


def row(phase: PhaseCost, name: str) -> KernelCost:
    """The breakdown row of kernel `name`."""
    (found,) = [k for k in phase.kernels if k.name == name]
    return found


def node_index(phase: PhaseCost, name: str) -> int:
    """Row of kernel `name` in the phase's table."""
    return [node.name for node in phase.table.nodes].index(name)


def column_sum(phase: PhaseCost, field: str, names: set[str] | None = None) -> float:
    """One Work field summed over the phase's kernels (all kernels, or those in `names`)."""
    values = phase.table.column(field)
    keep = np.array([names is None or node.name in names for node in phase.table.nodes])
    return float(values[keep].sum())


def total_tensor_flops(result: RequestEstimate) -> float:
    return column_sum(result.prefill, "tensor_flops") + column_sum(result.decode, "tensor_flops")
