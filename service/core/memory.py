"""Parameter counts, device-memory footprint per GPU, and the check that a request fits."""

from __future__ import annotations

import math

from service.core.architecture import ModelArchitecture
from service.core.cost_model_errors import InsufficientMemory
from service.core.mixers import delta_net_weight_elements, mamba_weight_elements
from service.core.recurrent import recurrent_state_bytes
from service.core.results import MemoryFootprint
from service.core.shards import ShardShapes, sliding_kv_width_ratio
from service.core.workload import Deployment, Workload


def attention_weight_elements(arch: ModelArchitecture) -> float:
    """Weight-matrix elements of one layer's attention (QKV and output projections)."""
    h = arch.hidden_size
    if arch.mla is not None:
        m = arch.mla
        heads = arch.num_attention_heads
        q_out = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        q = m.q_lora_rank * (h + q_out) if m.q_lora_rank else h * q_out  # 0: full-rank q_proj
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim)
        kv += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        if arch.dsa is not None:  # the indexer's wq_b, wk and weights_proj
            d = arch.dsa
            q += m.q_lora_rank * d.index_n_heads * d.index_head_dim
            q += h * (d.index_head_dim + d.index_n_heads)
        return q + kv + heads * m.v_head_dim * h
    o_proj = arch.num_attention_heads * arch.value_head_dim * h
    return h * (arch.q_proj_width + arch.kv_proj_width) + o_proj


def self_attention_weight_elements(arch: ModelArchitecture) -> float:
    """Attention weight elements of all self-attention layers, sliding-window layers of a
    second attention shape (`arch.sliding_attention`) at their own."""
    if arch.sliding_attention is None:
        return arch.num_attention_layers * attention_weight_elements(arch)
    full = arch.num_attention_layers - arch.num_sliding_window_layers
    sliding = attention_weight_elements(arch.sliding_layers())
    return full * attention_weight_elements(arch) + arch.num_sliding_window_layers * sliding


def mlp_weight_elements(arch: ModelArchitecture, width: float) -> float:
    """Weight elements of one MLP of FFN width `width` (gated: gate, up and down)."""
    return (3.0 if arch.mlp == "gated" else 2.0) * arch.hidden_size * width


def expert_weight_elements(arch: ModelArchitecture) -> float:
    """Weight elements of one routed expert: its MLP over `expert_input_width` (the latent of a
    latent MoE, else hidden)."""
    return (3.0 if arch.mlp == "gated" else 2.0) * arch.expert_input_width * arch.expert_width


def latent_projection_weight_elements(arch: ModelArchitecture) -> float:
    """Weight elements of one MoE layer's latent projections (hidden -> latent and back);
    0 without a latent."""
    return 2.0 * arch.hidden_size * arch.moe_latent_size if arch.moe_latent_size else 0.0


def mixer_weight_elements(arch: ModelArchitecture) -> float:
    """Token-mixer weight elements of all layers: attention plus recurrent mixers."""
    total = self_attention_weight_elements(arch)
    if arch.mamba is not None:
        total += arch.num_mamba_layers * arch.mamba.weight_elements(arch.hidden_size)
    if arch.delta_net is not None:
        total += arch.num_delta_net_layers * arch.delta_net.weight_elements(arch.hidden_size)
    return total


def recurrent_weight_elements_per_gpu(arch: ModelArchitecture, group: int) -> float:
    """Recurrent-mixer weight elements one of `group` tensor-parallel GPUs holds: its share of
    the heads, and the whole of Mamba-2 B and C projections where the groups do not split
    (`mixers.mamba_shard`: replicated, as vLLM does)."""
    h, total = arch.hidden_size, 0.0
    if arch.mamba is not None:
        total += arch.num_mamba_layers * mamba_weight_elements(arch.mamba, h, group)
    if arch.delta_net is not None:
        total += arch.num_delta_net_layers * delta_net_weight_elements(arch.delta_net, h, group)
    return total


def cross_attention_weight_elements(arch: ModelArchitecture) -> float:
    """Weight elements of the cross-attention layers a text-only request skips (each an
    attention block and a dense MLP of a self-attention layer's shapes)."""
    per_layer = attention_weight_elements(arch) + mlp_weight_elements(arch, arch.intermediate_size)
    return arch.num_cross_attention_layers * per_layer


def layer_weight_elements(arch: ModelArchitecture) -> float:
    """Weight-matrix elements of all decoder layers (no norms or biases)."""
    total = mixer_weight_elements(arch) + cross_attention_weight_elements(arch)
    total += arch.num_dense_mlp_layers * mlp_weight_elements(arch, arch.intermediate_size)
    if arch.is_moe:
        experts = arch.num_experts * expert_weight_elements(arch)
        shared = mlp_weight_elements(arch, arch.shared_expert_width)
        router = arch.hidden_size * arch.num_experts
        latent = latent_projection_weight_elements(arch)
        total += arch.num_moe_layers * (experts + shared + router + latent)
    return total


def parameter_count(arch: ModelArchitecture) -> float:
    """Weight-matrix parameters: layers plus input embedding plus LM head unless tied.

    Norm weights and biases are left out (they are < 0.1% of any model in the catalogue); this
    is the accounting under which GPT-3 has 175,181,291,520 parameters.
    """
    tables = 1 if arch.tie_word_embeddings else 2
    return layer_weight_elements(arch) + tables * arch.vocab_size * arch.hidden_size


def active_parameter_count(arch: ModelArchitecture) -> float:
    """Parameters one token passes through (routed experts counted k of E; a text token skips
    the cross-attention layers)."""
    total = parameter_count(arch) - cross_attention_weight_elements(arch)
    if not arch.is_moe:
        return total
    idle_experts = arch.num_experts - arch.experts_per_token
    return total - arch.num_moe_layers * idle_experts * expert_weight_elements(arch)


def weight_bytes_per_gpu(arch: ModelArchitecture, s: ShardShapes, pipeline: int) -> float:
    """Weight bytes on the most loaded GPU [B] (a stage with the embedding table)."""
    dense_mlp = mlp_weight_elements(arch, arch.intermediate_size)
    attention = self_attention_weight_elements(arch)
    # Attention and dense layers are sharded over one attention replica's GPUs (replicated
    # across attention-data-parallel replicas); routed experts over the whole stage.
    layer_bytes = (attention + arch.num_dense_mlp_layers * dense_mlp) / s.attention_group
    layer_bytes += cross_attention_weight_elements(arch) / s.attention_group
    layer_bytes += recurrent_weight_elements_per_gpu(arch, s.attention_group)
    if arch.is_moe:
        experts = s.local_experts * expert_weight_elements(arch) / s.tensor
        shared = mlp_weight_elements(arch, arch.shared_expert_width) / s.attention_group
        latent = latent_projection_weight_elements(arch)  # replicated, as the router
        layer_bytes += arch.num_moe_layers * (experts + shared + latent)
    layers_on_stage = math.ceil(arch.num_layers / pipeline) / arch.num_layers
    tables = 1 if (pipeline > 1 or arch.tie_word_embeddings) else 2
    table_bytes = (
        tables * arch.vocab_size * arch.hidden_size / s.attention_group * s.embedding_bytes
    )
    return layer_bytes * layers_on_stage * s.weight_bytes + table_bytes


def kv_cache_bytes_per_gpu(
    arch: ModelArchitecture, s: ShardShapes, workload: Workload, pipeline: int
) -> float:
    """KV cache of the batch at its longest [B] on one GPU (sliding layers hold their window):
    the keys and values of the attention layers, plus each sequence's recurrent state in the
    recurrent layers (which vLLM keeps in the same cache pool); attention-data-parallel
    replicas hold 1/data of the sequences each, on average."""
    tokens = workload.prompt_tokens + workload.output_tokens
    window = arch.sliding_window_tokens or tokens
    full_layers = arch.num_attention_layers - arch.num_sliding_window_layers
    sliding_layers = arch.num_sliding_window_layers * sliding_kv_width_ratio(arch, s)
    token_layers = full_layers * tokens + sliding_layers * min(tokens, window)
    per_stage = token_layers / pipeline
    sequences = workload.batch_size / s.data  # on this GPU's attention replica
    kv = sequences * per_stage * s.kv_cache_width * s.kv_bytes
    return kv + sequences * recurrent_state_bytes(arch, s) / pipeline


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
