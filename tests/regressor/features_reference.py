"""The feature encoder as the committed model was trained with it (energy-gnn-features 1),
written the straightforward way: per phase, Work rows from the kernel table, scalar global
features. The encoder in service.pricing.regressor is held equal to it."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from service.core.architecture import ModelArchitecture
from service.core.dtypes import bytes_per_element, gemm_compute_key
from service.core.kernel_table import KernelTable
from service.core.memory import active_parameter_count, parameter_count
from service.core.results import RequestEstimate
from service.core.work import WORK_FIELDS
from service.core.workload import Deployment, Workload
from service.pricing.regressor.context_features import graph_arrays
from service.pricing.regressor.feature_spec import (
    MEMORY_WORK_FIELDS,
    MJ_PER_J,
    NODE_PHASE_FEATURES,
    SHAPE_FIELDS,
    US_PER_S,
)
from service.pricing.regressor.features import RAW_COLUMNS, safe_log

FloatArray = npt.NDArray[np.float64]
RAW = {name: i for i, name in enumerate(RAW_COLUMNS)}


def raw_of(table: KernelTable) -> FloatArray:
    n = len(table.nodes)
    raw = np.empty((n, len(RAW_COLUMNS)))
    raw[:, 0] = table.executions
    raw[:, 1 : 1 + len(WORK_FIELDS)] = np.array(table.totals, dtype=np.float64)
    for name in ("time_s", "compute_s", "memory_s", "network_s", "gpu_j"):
        raw[:, RAW[name]] = getattr(table, name)
    return raw


def node_block(raw: FloatArray) -> FloatArray:
    n = raw.shape[0]
    block = np.empty((n, len(NODE_PHASE_FEATURES)))
    counts = 1 + len(WORK_FIELDS)
    block[:, :counts] = np.log1p(raw[:, :counts])
    executions = raw[:, :1]
    shapes = raw[:, [RAW[f] for f in SHAPE_FIELDS]]
    per_execution = np.divide(shapes, executions, out=np.zeros_like(shapes), where=executions > 0)
    at = counts + len(SHAPE_FIELDS)
    block[:, counts:at] = np.log1p(per_execution)
    for k, name in enumerate(("time_s", "compute_s", "memory_s", "network_s")):
        block[:, at + k] = np.log1p(US_PER_S * raw[:, RAW[name]])
    block[:, at + 4] = np.log1p(MJ_PER_J * raw[:, RAW["gpu_j"]])
    for offset, column in ((5, "time_s"), (6, "gpu_j")):
        total = raw[:, RAW[column]].sum()
        block[:, at + offset] = raw[:, RAW[column]] / total if total > 0 else 0.0
    limbs = raw[:, [RAW["compute_s"], RAW["memory_s"], RAW["network_s"]]]
    for i in range(n):
        block[i, at + 7 : at + 10] = 0.0
        if limbs[i].max() > 0:
            block[i, at + 7 + int(limbs[i].argmax())] = 1.0
    return block


def global_vector(
    arch: ModelArchitecture, w: Workload, dep: Deployment, e: RequestEstimate
) -> FloatArray:
    gpu, par, precision = dep.gpu, dep.parallelism, dep.precision
    key = gemm_compute_key(precision.weights, precision.activations)
    values = [
        math.log(arch.hidden_size),
        math.log(arch.intermediate_size),
        math.log(arch.expert_width),
        math.log(arch.num_attention_heads),
        math.log(arch.num_key_value_heads),
        math.log(arch.head_dim),
        math.log(arch.num_layers),
        math.log1p(arch.num_experts),
        math.log1p(arch.experts_per_token),
        (arch.num_moe_layers if arch.is_moe else 0) / arch.num_layers,
        arch.num_sliding_window_layers / arch.num_layers,
        float(arch.mla is not None),
        math.log(arch.vocab_size),
        math.log(parameter_count(arch)),
        math.log(active_parameter_count(arch)),
        8.0 * bytes_per_element(precision.weights),
        8.0 * bytes_per_element(precision.activations),
        8.0 * bytes_per_element(precision.kv_cache),
        math.log(w.batch_size),
        math.log(w.prompt_tokens),
        math.log(w.output_tokens),
        math.log(par.gpu_count),
        math.log(par.gpus_per_stage),
        math.log(par.expert),
        float(dep.flash_attention),
        math.log(gpu.gemm_peak_flops_per_s(key) / 1e12),
        math.log(gpu.cuda_core_fp32_flops_per_s / 1e12),
        math.log(gpu.memory_bandwidth_bytes_per_s / 1e9),
        math.log(gpu.interconnect_bandwidth_bytes_per_s / 1e9),
        math.log(gpu.memory_bytes / 1e9),
        math.log(gpu.tdp_w),
        math.log(gpu.idle_w),
        e.memory.required_bytes_per_gpu / e.memory.capacity_bytes_per_gpu,
    ]
    for table in (e.prefill.table, e.decode.table):
        raw = raw_of(table)
        values += [
            math.log1p(float(raw[:, RAW["tensor_flops"]].sum())),
            math.log1p(float(raw[:, [RAW[f] for f in MEMORY_WORK_FIELDS]].sum())),
            math.log1p(float(raw[:, RAW["network_bytes"]].sum())),
        ]
    kernel_s = e.prefill.time_s + e.decode.time_s
    values += [
        safe_log(e.gpu_j),
        safe_log(e.prefill.gpu_j),
        safe_log(e.decode.gpu_j),
        math.log1p(US_PER_S * e.prefill.time_s),
        math.log1p(US_PER_S * e.decode.time_s),
        math.log1p(US_PER_S * e.prefill.overhead_s),
        math.log1p(US_PER_S * e.decode.overhead_s),
        math.log1p(1e3 * e.time_per_output_token_s),
        e.gpu_j / (max(kernel_s, 1e-12) * par.gpu_count * gpu.tdp_w),
    ]
    return np.array(values)


def reference_features(
    arch: ModelArchitecture, w: Workload, dep: Deployment, e: RequestEstimate
) -> dict[str, FloatArray]:
    """node_x, adjacency, global_x and log_analytical_j of one request."""
    static, adjacency = graph_arrays(arch, dep)
    node_x = np.concatenate(
        [static, node_block(raw_of(e.prefill.table)), node_block(raw_of(e.decode.table))], axis=1
    )
    return {
        "node_x": node_x,
        "adjacency": adjacency,
        "global_x": global_vector(arch, w, dep, e),
        "log_analytical_j": np.array([safe_log(e.prefill.gpu_j), safe_log(e.decode.gpu_j)]),
    }
