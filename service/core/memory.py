"""Parameter counts, device-memory footprint per GPU, and the check that a request fits."""

from __future__ import annotations

import math

from service.core.architecture import ModelArchitecture
from service.core.cost_model_errors import InsufficientMemory
from service.core.results import MemoryFootprint
from service.core.shards import ShardShapes
from service.core.workload import Deployment, Workload


def attention_weight_elements(arch: ModelArchitecture) -> float:
    """Weight-matrix elements of one layer's attention (QKV and output projections)."""
    h = arch.hidden_size
    if arch.mla is not None:
        m = arch.mla
        heads = arch.num_attention_heads
        q = h * m.q_lora_rank + m.q_lora_rank * heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim)
        kv += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + heads * m.v_head_dim * h
    return h * (arch.query_width + 2 * arch.kv_width) + arch.query_width * h


def mlp_weight_elements(arch: ModelArchitecture, width: float) -> float:
    """Weight elements of one MLP of FFN width `width` (gated: gate, up and down)."""
    return (3.0 if arch.mlp == "gated" else 2.0) * arch.hidden_size * width


def layer_weight_elements(arch: ModelArchitecture) -> float:
    """Weight-matrix elements of all decoder layers (no norms or biases)."""
    dense_layers = arch.num_layers - (arch.num_moe_layers if arch.is_moe else 0)
    total = arch.num_layers * attention_weight_elements(arch)
    total += dense_layers * mlp_weight_elements(arch, arch.intermediate_size)
    if arch.is_moe:
        experts = arch.num_experts * mlp_weight_elements(arch, arch.expert_width)
        shared = mlp_weight_elements(arch, arch.shared_expert_width)
        router = arch.hidden_size * arch.num_experts
        total += arch.num_moe_layers * (experts + shared + router)
    return total


def parameter_count(arch: ModelArchitecture) -> float:
    """Weight-matrix parameters: layers plus input embedding plus LM head unless tied.

    Norm weights and biases are left out (they are < 0.1% of any model in the catalogue); this
    is the accounting under which GPT-3 has 175,181,291,520 parameters.
    """
    tables = 1 if arch.tie_word_embeddings else 2
    return layer_weight_elements(arch) + tables * arch.vocab_size * arch.hidden_size


def active_parameter_count(arch: ModelArchitecture) -> float:
    """Parameters one token passes through (routed experts counted k of E)."""
    total = parameter_count(arch)
    if not arch.is_moe:
        return total
    idle_experts = arch.num_experts - arch.experts_per_token
    return total - arch.num_moe_layers * idle_experts * mlp_weight_elements(arch, arch.expert_width)


def weight_bytes_per_gpu(arch: ModelArchitecture, s: ShardShapes, pipeline: int) -> float:
    """Weight bytes on the most loaded GPU [B] (a stage with the embedding table)."""
    dense_layers = arch.num_layers - (arch.num_moe_layers if arch.is_moe else 0)
    per_layer_dense = attention_weight_elements(arch) + mlp_weight_elements(
        arch, arch.intermediate_size
    )
    layer_bytes = dense_layers * per_layer_dense / s.attention_group
    if arch.is_moe:
        experts = s.local_experts * mlp_weight_elements(arch, arch.expert_width) / s.tensor
        shared = mlp_weight_elements(arch, arch.shared_expert_width) / s.attention_group
        attention = attention_weight_elements(arch) / s.attention_group
        layer_bytes += arch.num_moe_layers * (experts + shared + attention)
    layers_on_stage = math.ceil(arch.num_layers / pipeline) / arch.num_layers
    tables = 1 if (pipeline > 1 or arch.tie_word_embeddings) else 2
    table_bytes = (
        tables * arch.vocab_size * arch.hidden_size / s.attention_group * s.embedding_bytes
    )
    return layer_bytes * layers_on_stage * s.weight_bytes + table_bytes


def kv_cache_bytes_per_gpu(
    arch: ModelArchitecture, s: ShardShapes, workload: Workload, pipeline: int
) -> float:
    """KV cache of the batch at its longest [B] on one GPU (sliding layers hold their window;
    attention-data-parallel replicas hold 1/data of the sequences each, on average)."""
    tokens = workload.prompt_tokens + workload.output_tokens
    window = arch.sliding_window_tokens or tokens
    full_layers = arch.num_layers - arch.num_sliding_window_layers
    token_layers = full_layers * tokens + arch.num_sliding_window_layers * min(tokens, window)
    per_stage = token_layers / pipeline
    return workload.batch_size / s.data * per_stage * s.kv_cache_width * s.kv_bytes


def memory_footprint(
    arch: ModelArchitecture, s: ShardShapes, workload: Workload, deployment: Deployment
) -> MemoryFootprint:
    """Weights and KV cache per GPU against the GPU's memory."""
    pipeline = deployment.parallelism.pipeline
    return MemoryFootprint(
        weight_bytes_per_gpu=weight_bytes_per_gpu(arch, s, pipeline),
        kv_cache_bytes_per_gpu=kv_cache_bytes_per_gpu(arch, s, workload, pipeline),
        capacity_bytes_per_gpu=deployment.gpu.memory_bytes,
    )


def check_fits(footprint: MemoryFootprint, deployment: Deployment) -> None:
    """Raise InsufficientMemory, saying how many GPUs would hold the request, if it does not fit.

    The estimate of GPUs needed assumes weights and KV cache shard evenly (tensor parallelism)
    and rounds up to a power of two, the degrees serving frameworks support.
    """
    if footprint.required_bytes_per_gpu <= footprint.capacity_bytes_per_gpu:
        return
    count = deployment.gpu_count
    total = footprint.required_bytes_per_gpu * count
    needed = max(count + 1, math.ceil(total / footprint.capacity_bytes_per_gpu))
    needed = 2 ** math.ceil(math.log2(needed))
    gib = 2.0**30
    raise InsufficientMemory(
        f"needs {footprint.required_bytes_per_gpu / gib:.1f} GiB per GPU "
        f"({footprint.weight_bytes_per_gpu / gib:.1f} GiB weights + "
        f"{footprint.kv_cache_bytes_per_gpu / gib:.1f} GiB KV cache) but {deployment.gpu.id} has "
        f"{footprint.capacity_bytes_per_gpu / gib:.1f} GiB; use at least {needed} GPUs, a smaller "
        "batch or shorter sequences, or lower-precision weights/KV cache",
        required_gpu_count=needed,
        field="hardware.count",
    )
