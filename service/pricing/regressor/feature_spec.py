"""What the regressor's input is: the names of the per-node and global features, their units,
and the spec whose hash a shipped model must match (computed in
service.pricing.regressor.features).

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
from typing import Any

from service.core.graph import KERNEL_KINDS
from service.core.work import WORK_FIELDS

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
