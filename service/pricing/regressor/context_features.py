"""The features a request shares with every request of its context (model and deployment): the
kernel graph's static node features and adjacency, and the global features fixed by the
architecture, precision, layout and GPU. Cached per context (`context_encoding`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from service.core.architecture import ModelArchitecture
from service.core.dtypes import bytes_per_element, gemm_compute_key
from service.core.graph import ENCODED_AS, KERNEL_KINDS, all_to_all_expert_group, build_kernel_graph
from service.core.memory import active_parameter_count, parameter_count
from service.core.pass_plans import PricingContext
from service.core.workload import Deployment
from service.pricing.regressor.feature_spec import (
    GLOBAL_FEATURE_GROUPS,
    GLOBAL_FEATURES,
    NODE_STATIC_FEATURES,
)

FloatArray = npt.NDArray[np.float64]


@lru_cache(maxsize=512)
def _graph_arrays(
    arch: ModelArchitecture, flash: bool, tensor_group: int, pipeline: int, expert: int
) -> tuple[FloatArray, FloatArray]:
    graph = build_kernel_graph(
        arch,
        flash_attention=flash,
        tensor_group=tensor_group,
        pipeline_stages=pipeline,
        expert_group=expert,
    )
    nodes = graph.nodes + graph.step_nodes
    static = np.zeros((len(nodes), len(NODE_STATIC_FEATURES)))
    for i, node in enumerate(nodes):
        static[i, KERNEL_KINDS.index(ENCODED_AS.get(node.kind, node.kind))] = 1.0
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
    expert = all_to_all_expert_group(par.expert, par.data)  # the cost plan's graph
    return _graph_arrays(
        arch, deployment.flash_attention, par.attention_group, par.pipeline, expert
    )


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


@dataclass(frozen=True, slots=True)
class ContextEncoding:
    """What the encoder reads of a pricing context, whatever the workload (read-only arrays).

    Attributes:
        static: [nodes, NODE_STATIC_FEATURES] the graph's static node features.
        adjacency: [nodes, nodes] its mean-aggregation matrix.
        fixed: the global features `deployment_values` gives.
        global_row: [GLOBAL_FEATURES] those in their places, 0 in the others (which the
            encoder fills per request).
    """

    static: FloatArray
    adjacency: FloatArray
    fixed: FloatArray
    global_row: FloatArray


@lru_cache(maxsize=4096)
def context_encoding(context: PricingContext) -> ContextEncoding:
    """The ContextEncoding of `context`, cached by the context itself (contexts are cached and
    compared by identity, so finding it costs no hashing of the model or deployment)."""
    arch, deployment = context.plan.arch, context.deployment
    fixed = np.array(deployment_values(arch, deployment))
    # the workload's three come between the precision and the layout
    global_row = np.zeros(len(GLOBAL_FEATURES))
    global_row[:WORKLOAD_AT] = fixed[:WORKLOAD_AT]
    global_row[WORKLOAD_AT + 3 : fixed.shape[0] + 3] = fixed[WORKLOAD_AT:]
    for array in (fixed, global_row):
        array.setflags(write=False)
    return ContextEncoding(*graph_arrays(arch, deployment), fixed, global_row)
