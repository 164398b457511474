"""Per-GPU shapes of a model under a parallel layout, and the checks that the layout divides it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TypedDict

from service.core.architecture import ModelArchitecture
from service.core.cost_model_errors import InvalidParallelism
from service.core.dtypes import DType, bytes_per_element, weight_bytes_per_element
from service.core.workload import Deployment


@dataclass(frozen=True, slots=True)
class ShardShapes:
    """Widths [elements] one GPU of a pipeline stage holds, and storage sizes [B/element].

    `group` GPUs (tensor x expert) form a stage; attention and dense layers are sharded over
    `attention_group` of them (group / `data` attention-data-parallel replicas, each with its
    1/data share of the sequences); experts are spread over `expert` groups and each is
    sharded over `tensor` GPUs. `expert_stream_bytes` is the size a
    routed expert's weights are timed at (see `expert_stream_bytes`); their storage size is
    `weight_bytes`. `unfused_norms`: norms run as separate ops (`Deployment.unfused_norms`).
    `expert_imbalance`: the most loaded expert-parallel rank's routed rows over the mean
    (`moe.expert_load_imbalance`; 1 when routing is even or `expert` is 1).
    """

    group: int
    tensor: int
    expert: int
    hidden: int
    heads: int
    query_width: int
    qk_head_dim: int
    v_head_dim: int
    k_cache_width: int
    v_cache_width: int
    kv_proj_width: int
    mlp_width: float
    expert_width: float
    shared_width: float
    local_experts: int
    vocab: float
    weight_bytes: float
    activation_bytes: float
    kv_bytes: float
    embedding_bytes: float
    expert_stream_bytes: float
    unfused_norms: bool = False
    index_cache_bytes: float = 0.0
    expert_imbalance: float = 1.0
    data: int = 1

    @property
    def attention_group(self) -> int:
        """GPUs attention and the dense layers are sharded over: the stage's `group` over its
        `data` attention-data-parallel replicas."""
        return self.group // self.data

    @property
    def kv_cache_width(self) -> float:
        """KV-cache elements per token per layer on one GPU (keys + values, or MLA latent; DSA's
        index keys, `index_cache_bytes` replicated on every GPU, counted at `kv_bytes` each)."""
        return self.k_cache_width + self.v_cache_width + self.index_cache_bytes / self.kv_bytes


def shard_shapes(arch: ModelArchitecture, deployment: Deployment) -> ShardShapes:
    """Per-GPU shapes of `arch` on `deployment`; InvalidParallelism if the layout does not split."""
    par = deployment.parallelism
    _check_divides(arch, par.tensor, par.expert, par.pipeline, par.data)
    if arch.sliding_attention is not None:  # the sliding layers' heads must split too
        _check_divides(arch.sliding_layers(), par.tensor, par.expert, par.pipeline, par.data)
    attention = par.attention_group  # GPUs sharding attention and the dense layers
    precision = deployment.precision
    # Embedding and LM-head tables stay in 16-bit under weight quantisation (as served).
    sixteen_bit = (
        precision.activations if precision.activations in (DType.BF16, DType.FP16) else DType.BF16
    )
    return ShardShapes(
        group=par.gpus_per_stage,
        tensor=par.tensor,
        expert=par.expert,
        hidden=arch.hidden_size,
        **_attention_widths(arch, attention),
        mlp_width=arch.intermediate_size / attention,
        expert_width=arch.expert_width / par.tensor,
        shared_width=arch.shared_expert_width / attention,
        local_experts=max(1, arch.num_experts // par.expert),
        vocab=arch.vocab_size / attention,
        weight_bytes=weight_bytes_per_element(
            precision.weights,
            fp8_block_scaled=arch.fp8_block_scaled,
            int4_group_size=arch.int4_group_size,
        ),
        activation_bytes=bytes_per_element(precision.activations),
        kv_bytes=bytes_per_element(precision.kv_cache),
        embedding_bytes=bytes_per_element(sixteen_bit),
        expert_stream_bytes=expert_stream_bytes(arch, precision.weights),
        unfused_norms=deployment.unfused_norms,
        index_cache_bytes=arch.dsa.key_bytes if arch.dsa is not None else 0.0,
        data=par.data,
    )


class _AttentionWidths(TypedDict):
    heads: int
    query_width: int
    qk_head_dim: int
    v_head_dim: int
    k_cache_width: int
    v_cache_width: int
    kv_proj_width: int


def _attention_widths(arch: ModelArchitecture, attention: int) -> _AttentionWidths:
    """ShardShapes' attention fields of `arch`'s top-level attention shape on one of
    `attention` tensor-parallel GPUs."""
    heads = arch.num_attention_heads // attention
    if arch.mla is not None:
        mla = arch.mla
        latent = mla.kv_lora_rank + mla.qk_rope_head_dim
        qk_dim, v_dim = latent, mla.kv_lora_rank  # weight-absorbed attention works in latent space
        k_cache, v_cache = latent, 0  # one latent vector per token, shared by all heads
        kv_proj = mla.kv_lora_rank + mla.qk_rope_head_dim
    else:
        kv_heads = max(1, arch.num_key_value_heads // attention)  # replicated beyond the KV heads
        qk_dim, v_dim = arch.head_dim, arch.value_head_dim
        k_cache, v_cache = kv_heads * qk_dim, kv_heads * v_dim
        # keys used as values (Gemma 4's full layers): one projection, both cached
        kv_proj = k_cache + (0 if arch.values_from_keys else v_cache)
    return _AttentionWidths(
        heads=heads, query_width=heads * arch.head_dim, qk_head_dim=qk_dim, v_head_dim=v_dim,
        k_cache_width=k_cache, v_cache_width=v_cache, kv_proj_width=kv_proj,
    )  # fmt: skip


@lru_cache(maxsize=256)
def sliding_layer_shapes(
    arch: ModelArchitecture, s: ShardShapes
) -> tuple[ModelArchitecture, ShardShapes]:
    """The model and per-GPU shapes as a sliding-window layer of a second attention shape
    (`arch.sliding_attention`) sees them: its heads, head sizes and cache widths; `(arch, s)`
    itself without one."""
    if arch.sliding_attention is None:
        return arch, s
    view = arch.sliding_layers()
    return view, replace(s, **_attention_widths(view, s.attention_group))


def sliding_kv_width_ratio(arch: ModelArchitecture, s: ShardShapes) -> float:
    """A sliding-window layer's KV-cache width per token over a full layer's (1 without a
    second attention shape): the cache sums sliding layers weighted by it."""
    if arch.sliding_attention is None:
        return 1.0
    return sliding_layer_shapes(arch, s)[1].kv_cache_width / s.kv_cache_width


def expert_stream_bytes(arch: ModelArchitecture, weights: DType) -> float:
    """Bytes per routed-expert weight element that expert GEMM time is priced at [B/element].

    The storage size, except for block-scaled FP8 checkpoints (`arch.fp8_block_scaled`) served
    in fp8: vLLM's Triton fused-MoE kernel for them was locked to 128-wide output tiles (the
    quantisation block), too few thread blocks to fill an H100 at decode, and ran no faster
    than the bf16 kernel, so they are priced at the 16-bit size. Sources: vLLM PR #46642
    (https://github.com/vllm-project/vllm/pull/46642, "Block-quantized FP8 fused MoE was locked
    to BLOCK_SIZE_N = block_shape[0] (128) ... At decode the gate-up GEMM is SM-bound"; merged
    2026-06, after vLLM 0.11); vLLM issue #25540
    (https://github.com/vllm-project/vllm/issues/25540, Qwen3-235B-A22B-Instruct-2507-FP8
    serving slower than its bf16 twin). Per-channel FP8 checkpoints (e.g. fbgemm's) keep the
    1-byte size: the evidence is about the block-scaled kernel only.
    """
    if block_fp8_experts(arch, weights):
        return bytes_per_element(DType.BF16)
    return weight_bytes_per_element(weights, int4_group_size=arch.int4_group_size)


def block_fp8_experts(arch: ModelArchitecture, weights: DType) -> bool:
    """Whether `arch`'s routed experts are a block-scaled FP8 checkpoint served in fp8, whose
    expert GEMM speed depends on the engine's kernel (`RooflineCoefficients.
    block_fp8_expert_bytes`, which `plan.cost_plan` applies; 2 bytes, as here, by default)."""
    return arch.fp8_block_scaled and weights is DType.FP8


def _check_divides(
    arch: ModelArchitecture, tensor: int, expert: int, pipeline: int, data: int
) -> None:
    if min(tensor, expert, pipeline, data) < 1:
        raise InvalidParallelism(
            "parallel degrees must be at least 1", field="hardware.parallelism"
        )
    if (tensor * expert) % data != 0:
        raise InvalidParallelism(
            f"parallelism.data = {data} must divide the {tensor * expert} GPUs per stage",
            field="hardware.parallelism.data",
        )
    if data > 1 and arch.is_moe and expert != tensor * expert:
        raise InvalidParallelism(
            "with attention data parallelism the experts are priced spread whole over every "
            f"GPU of the stage: set parallelism.expert to {tensor * expert}",
            field="hardware.parallelism.expert",
        )
    group = tensor * expert // data
    if arch.num_attention_layers and arch.num_attention_heads % group != 0:
        raise InvalidParallelism(
            f"{group} tensor-parallel GPUs per attention replica must divide the "
            f"{arch.num_attention_heads} attention heads; use a degree that divides it",
            field="hardware.parallelism.tensor",
        )
    kv = arch.num_key_value_heads
    if arch.mla is None and kv % group != 0 and group % kv != 0:
        raise InvalidParallelism(
            f"{group} GPUs per stage and {kv} KV heads: one must divide the other",
            field="hardware.parallelism.tensor",
        )
    recurrent = {
        "Mamba-2 heads": arch.mamba.num_heads if arch.mamba and arch.num_mamba_layers else 0,
        "linear-attention key heads": arch.delta_net.num_key_heads
        if arch.delta_net and arch.num_delta_net_layers
        else 0,
    }
    for name, heads in recurrent.items():
        if heads and heads % group != 0:
            raise InvalidParallelism(
                f"tensor x expert = {group} GPUs per stage must divide the {heads} {name}",
                field="hardware.parallelism.tensor",
            )
    groups = arch.mamba.n_groups if arch.mamba and arch.num_mamba_layers else 1
    if groups > 1 and groups % group != 0:  # vLLM's MambaMixer2 replicates a single group only
        raise InvalidParallelism(
            f"tensor x expert = {group} GPUs per stage must divide the {groups} Mamba-2 groups",
            field="hardware.parallelism.tensor",
        )
    if expert > 1 and not arch.is_moe:
        raise InvalidParallelism(
            "expert parallelism needs a mixture-of-experts model; set parallelism.expert to 1",
            field="hardware.parallelism.expert",
        )
    if arch.is_moe and arch.num_experts % expert != 0:
        raise InvalidParallelism(
            f"parallelism.expert = {expert} must divide the {arch.num_experts} experts",
            field="hardware.parallelism.expert",
        )
    if arch.num_layers % pipeline != 0 and pipeline > arch.num_layers:
        raise InvalidParallelism(
            f"parallelism.pipeline = {pipeline} exceeds the {arch.num_layers} layers",
            field="hardware.parallelism.pipeline",
        )
