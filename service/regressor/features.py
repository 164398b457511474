"""The regressor's input: a request as the kernel graph of its model, with per-node features for
prefill and decode, and request-level (global) features. Pure numpy; training and serving both
call `request_features`, so the two can never encode a request differently.

Nodes are the cost model's kernels (`graph.nodes + graph.step_nodes`, the order of the kernel
tables). Edges are the layer graph's data dependencies, plus the per-step kernels chained in
order (embedding -> first layer kernel, last layer kernel -> final norm -> LM head -> sampling),
taken both ways; GraphSAGE averages over them with the row-normalised adjacency.

Every count, byte, time and energy enters as log1p of the value in a stated unit (times in µs,
energies in mJ) so features span a few units whatever the model size.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.dtypes import bytes_per_element, gemm_compute_key
from service.core.estimate import estimate_request
from service.core.graph import KERNEL_KINDS, build_kernel_graph
from service.core.kernel_table import KernelTable
from service.core.memory import active_parameter_count, parameter_count
from service.core.results import RequestEstimate
from service.core.work import WORK_FIELDS
from service.core.workload import Deployment, Workload

FloatArray = npt.NDArray[np.float64]

FEATURE_VERSION = "energy-gnn-features 1"
PHASES = ("prefill", "decode")
US_PER_S = 1e6
MJ_PER_J = 1e3
MIN_ENERGY_J = 1e-6
MEMORY_WORK_FIELDS = (
    "weight_bytes",
    "activation_read_bytes",
    "activation_write_bytes",
    "kv_cache_read_bytes",
    "kv_cache_write_bytes",
)
SHAPE_FIELDS = ("tensor_flops", "weight_bytes", "activation_read_bytes", "activation_write_bytes")

NODE_STATIC_FEATURES: tuple[str, ...] = (*(f"kind={k}" for k in KERNEL_KINDS), "log_layers")
NODE_PHASE_FEATURES: tuple[str, ...] = (
    "log_executions",
    *(f"log_{f}" for f in WORK_FIELDS),
    *(f"log_{f}_per_execution" for f in SHAPE_FIELDS),
    "log_time_us",
    "log_compute_us",
    "log_memory_us",
    "log_network_us",
    "log_gpu_mj",
    "time_share",
    "energy_share",
    "bound=compute",
    "bound=memory",
    "bound=network",
)
ROOFLINE_NODE_FEATURES = frozenset(NODE_PHASE_FEATURES[-10:])
"""Per-node roofline performance on the chosen GPU (the hardware-specific features)."""

GLOBAL_FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "architecture": (
        "log_hidden_size",
        "log_intermediate_size",
        "log_expert_width",
        "log_attention_heads",
        "log_kv_heads",
        "log_head_dim",
        "log_layers",
        "log1p_experts",
        "log1p_experts_per_token",
        "moe_layer_share",
        "sliding_layer_share",
        "mla",
        "log_vocab",
        "log_parameters",
        "log_active_parameters",
    ),
    "precision": ("weight_bits", "activation_bits", "kv_cache_bits"),
    "workload": ("log_batch", "log_prompt_tokens", "log_output_tokens"),
    "deployment": ("log_gpu_count", "log_gpus_per_stage", "log_expert_parallel", "flash"),
    "gpu": (
        "log_gemm_peak_tflops",
        "log_cuda_core_tflops",
        "log_memory_bandwidth_gbps",
        "log_interconnect_gbps",
        "log_memory_gb",
        "log_tdp_w",
        "log_idle_w",
        "memory_use",
    ),
    "totals": tuple(
        f"{phase}_log_{quantity}"
        for phase in PHASES
        for quantity in ("tensor_flops", "memory_bytes", "network_bytes")
    ),
    "analytical": (
        "log_gpu_j",
        "log_prefill_gpu_j",
        "log_decode_gpu_j",
        "log_prefill_us",
        "log_decode_us",
        "log_prefill_overhead_us",
        "log_decode_overhead_us",
        "log_time_per_output_token_ms",
        "mean_power_share",
    ),
}
GLOBAL_FEATURES: tuple[str, ...] = tuple(n for g in GLOBAL_FEATURE_GROUPS.values() for n in g)
ROOFLINE_GLOBAL_FEATURES = frozenset(GLOBAL_FEATURE_GROUPS["gpu"])


def feature_spec() -> dict[str, Any]:
    """Everything that fixes the encoding; its hash must match a model's to serve it."""
    return {
        "version": FEATURE_VERSION,
        "kernel_kinds": list(KERNEL_KINDS),
        "phases": list(PHASES),
        "node_static": list(NODE_STATIC_FEATURES),
        "node_per_phase": list(NODE_PHASE_FEATURES),
        "global": list(GLOBAL_FEATURES),
        "units": {"time": "us", "energy": "mJ", "transform": "log1p"},
        "edges": "layer dependencies + step-node chain, undirected, row-normalised (mean)",
        "analytical_input": "log prefill and decode gpu_j [J] of estimate_request",
    }


def feature_spec_sha256(spec: dict[str, Any] | None = None) -> str:
    """sha256 of the canonical JSON of `spec` (default: this code's feature_spec())."""
    text = json.dumps(spec if spec is not None else feature_spec(), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class RequestFeatures:
    """One request, encoded (unnormalised).

    Attributes:
        node_x: [nodes, len(NODE_STATIC_FEATURES) + 2 * len(NODE_PHASE_FEATURES)]: static
            features, then prefill's, then decode's.
        adjacency: [nodes, nodes] mean-aggregation matrix (row i averages i's neighbours).
        global_x: [len(GLOBAL_FEATURES)].
        log_analytical_j: [2] log of the analytical prefill and decode GPU energy [J].
    """

    node_x: FloatArray
    adjacency: FloatArray
    global_x: FloatArray
    log_analytical_j: FloatArray


def request_features(
    arch: ModelArchitecture,
    workload: Workload,
    deployment: Deployment,
    coefficients: CostModelCoefficients,
    estimate: RequestEstimate | None = None,
) -> RequestFeatures:
    """Encode a request. `estimate` may pass the analytical estimate of these very inputs (with
    these coefficients) when the caller has it already; otherwise it is computed."""
    if estimate is None:
        estimate = estimate_request(arch, workload, deployment, coefficients, check_memory=False)
    static, adjacency = graph_arrays(arch, deployment)
    raw = _raw_of_both(estimate.prefill.table, estimate.decode.table)
    if raw.shape[1] != static.shape[0]:
        raise ValueError("kernel tables and kernel graph disagree on the node count")
    prefill, decode = phase_node_block_of(raw)  # both phases in one set of array operations
    return RequestFeatures(
        node_x=np.concatenate([static, prefill, decode], axis=1),
        adjacency=adjacency,
        global_x=_global_vector(arch, workload, deployment, estimate, (raw[0], raw[1])),
        log_analytical_j=np.array(
            [safe_log(estimate.prefill.gpu_j), safe_log(estimate.decode.gpu_j)]
        ),
    )


def safe_log(joules: float) -> float:
    """log of an energy [J], floored at 1 µJ (a request with one output token has no decode)."""
    return math.log(max(joules, MIN_ENERGY_J))


RAW_COLUMNS: tuple[str, ...] = (
    "executions",
    *WORK_FIELDS,
    "time_s",
    "compute_s",
    "memory_s",
    "network_s",
    "gpu_j",
)
"""Columns of a phase's raw per-kernel matrix (units: executions, ops, B, s, J)."""
_RAW = {name: i for i, name in enumerate(RAW_COLUMNS)}
_COUNTS = slice(0, 1 + len(WORK_FIELDS))  # executions and every Work field
_SHAPES = [_RAW[f] for f in SHAPE_FIELDS]
_LIMBS = slice(_RAW["compute_s"], _RAW["network_s"] + 1)
_TIMES_AND_ENERGY = slice(_RAW["time_s"], _RAW["gpu_j"] + 1)
_TO_US_AND_MJ = np.array([US_PER_S] * 4 + [MJ_PER_J])
_SHARED = [_RAW["time_s"], _RAW["gpu_j"]]
_ONE_HOT = np.eye(3)
_MEMORY = [_RAW[f] for f in MEMORY_WORK_FIELDS]


def phase_raw(table: KernelTable) -> FloatArray:
    """[kernels, RAW_COLUMNS] of one phase's table (public table attributes only)."""
    return np.column_stack(
        [
            table.executions,
            table.totals_matrix,
            table.time_s,
            table.compute_s,
            table.memory_s,
            table.network_s,
            table.gpu_j,
        ]
    )


def _raw_of_both(prefill: KernelTable, decode: KernelTable) -> FloatArray:
    """[2, kernels, RAW_COLUMNS]: phase_raw of both phases in a few array operations."""
    limbs = np.array(
        [
            [t.executions, t.time_s, t.compute_s, t.memory_s, t.network_s, t.gpu_j]
            for t in (prefill, decode)
        ]
    ).transpose(0, 2, 1)
    totals = np.array([prefill.totals_matrix, decode.totals_matrix])
    return np.concatenate([limbs[..., :1], totals, limbs[..., 1:]], axis=2)


def phase_node_block_of(raw: FloatArray) -> FloatArray:
    """NODE_PHASE_FEATURES from a raw matrix [..., kernels, RAW_COLUMNS] (any leading axes:
    phases, requests; also used on prefill + decode in ablations). Shares are of the kernels'
    sums along the kernels axis."""
    shape = raw.shape[:-1]
    counts = 1 + len(WORK_FIELDS)
    # A kernel with no execution (decode of a one-token output) has all counts 0: dividing by
    # max(executions, 1) gives its per-execution shapes 0, the others exactly count/executions.
    per_execution = raw[..., _SHAPES] / np.maximum(raw[..., :1], 1.0)
    # Every log1p feature in one call: counts, per-execution shapes, times [µs], energy [mJ].
    scaled = np.concatenate(
        [raw[..., _COUNTS], per_execution, raw[..., _TIMES_AND_ENERGY] * _TO_US_AND_MJ], axis=-1
    )
    at = counts + len(SHAPE_FIELDS) + 5
    block = np.empty((*shape, len(NODE_PHASE_FEATURES)))
    np.log1p(scaled, out=block[..., :at])
    shared = raw[..., _SHARED]  # time_s, gpu_j
    total = shared.sum(axis=-2, keepdims=True)
    block[..., at : at + 2] = 0.0  # a phase with no kernel time (no decode step) has no shares
    np.divide(shared, total, out=block[..., at : at + 2], where=total > 0)
    limbs = raw[..., _LIMBS]
    bound = block[..., at + 2 : at + 5]
    bound[:] = _ONE_HOT[limbs.argmax(axis=-1)]  # the first largest limb, as np.argmax picks
    bound *= limbs.max(axis=-1, keepdims=True) > 0
    return block


@lru_cache(maxsize=512)
def _graph_arrays(
    arch: ModelArchitecture, flash: bool, tensor_group: int, pipeline: int
) -> tuple[FloatArray, FloatArray]:
    graph = build_kernel_graph(
        arch, flash_attention=flash, tensor_group=tensor_group, pipeline_stages=pipeline
    )
    nodes = graph.nodes + graph.step_nodes
    static = np.zeros((len(nodes), len(NODE_STATIC_FEATURES)))
    for i, node in enumerate(nodes):
        static[i, KERNEL_KINDS.index(node.kind)] = 1.0
        static[i, -1] = math.log(node.layers)
    layer, steps = len(graph.nodes), len(graph.step_nodes)
    edges = list(graph.edges)
    final_norm = next(i for i, n in enumerate(graph.step_nodes) if n.kind == "norm")
    for i in range(steps - 1):
        if i + 1 == final_norm:  # embedding (+ its all-reduce) feed the layers, not the head
            edges += [(layer + i, 0), (layer - 1, layer + final_norm)]
        else:
            edges.append((layer + i, layer + i + 1))
    adjacency = np.zeros((len(nodes), len(nodes)))
    for source, target in edges:
        adjacency[source, target] = adjacency[target, source] = 1.0
    degree = adjacency.sum(axis=1, keepdims=True)
    mean: FloatArray = np.divide(adjacency, degree, out=np.zeros_like(adjacency), where=degree > 0)
    for array in (static, mean):
        array.setflags(write=False)  # shared by every request on this graph
    return static, mean


def graph_arrays(arch: ModelArchitecture, deployment: Deployment) -> tuple[FloatArray, FloatArray]:
    """Static node features (kind one-hot, log layers) and the row-normalised undirected
    adjacency over `graph.nodes + graph.step_nodes` (read-only, cached per graph)."""
    par = deployment.parallelism
    return _graph_arrays(arch, deployment.flash_attention, par.gpus_per_stage, par.pipeline)


@lru_cache(maxsize=512)
def _architecture_values(arch: ModelArchitecture) -> tuple[float, ...]:
    return (
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
    )


@lru_cache(maxsize=512)
def deployment_values(arch: ModelArchitecture, deployment: Deployment) -> tuple[float, ...]:
    """The global features fixed by the model and deployment (architecture, precision, layout,
    GPU), in GLOBAL_FEATURES order; the workload's three come between precision and layout."""
    gpu, par, precision = deployment.gpu, deployment.parallelism, deployment.precision
    key = gemm_compute_key(precision.weights, precision.activations)
    return (
        *_architecture_values(arch),
        *(8.0 * bytes_per_element(d) for d in (precision.weights, precision.activations)),
        8.0 * bytes_per_element(precision.kv_cache),
        math.log(par.gpu_count),
        math.log(par.gpus_per_stage),
        math.log(par.expert),
        float(deployment.flash_attention),
        math.log(gpu.gemm_peak_flops_per_s(key) / 1e12),
        math.log(gpu.cuda_core_fp32_flops_per_s / 1e12),
        math.log(gpu.memory_bandwidth_bytes_per_s / 1e9),
        math.log(gpu.interconnect_bandwidth_bytes_per_s / 1e9),
        math.log(gpu.memory_bytes / 1e9),
        math.log(gpu.tdp_w),
        math.log(gpu.idle_w),
    )


WORKLOAD_AT = len(GLOBAL_FEATURE_GROUPS["architecture"]) + len(GLOBAL_FEATURE_GROUPS["precision"])
"""Index in GLOBAL_FEATURES of the first workload feature (what deployment_values skips)."""


def _global_vector(
    arch: ModelArchitecture,
    workload: Workload,
    deployment: Deployment,
    e: RequestEstimate,
    raw: tuple[FloatArray, FloatArray],
) -> FloatArray:
    fixed = deployment_values(arch, deployment)
    kernel_s = e.prefill.time_s + e.decode.time_s
    values: list[float] = [
        *fixed[:WORKLOAD_AT],
        math.log(workload.batch_size),
        math.log(workload.prompt_tokens),
        math.log(workload.output_tokens),
        *fixed[WORKLOAD_AT:],
        e.memory.required_bytes_per_gpu / e.memory.capacity_bytes_per_gpu,
    ]
    for phase in raw:
        sums = phase.sum(axis=0).tolist()  # every column's total over the kernels, at once
        values += [
            math.log1p(sums[_RAW["tensor_flops"]]),
            math.log1p(sum(sums[i] for i in _MEMORY)),
            math.log1p(sums[_RAW["network_bytes"]]),
        ]
    values += [
        *(safe_log(j) for j in (e.gpu_j, e.prefill.gpu_j, e.decode.gpu_j)),
        math.log1p(US_PER_S * e.prefill.time_s),
        math.log1p(US_PER_S * e.decode.time_s),
        math.log1p(US_PER_S * e.prefill.overhead_s),
        math.log1p(US_PER_S * e.decode.overhead_s),
        math.log1p(1e3 * e.time_per_output_token_s),
        e.gpu_j / (max(kernel_s, 1e-12) * deployment.parallelism.gpu_count * deployment.gpu.tdp_w),
    ]
    return np.array(values, dtype=np.float64)
