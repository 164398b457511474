"""Decoder-only transformer architecture: the shapes every kernel count is built from."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from service.core.cost_model_errors import InvalidArchitecture
from service.core.mixers import DeltaNetShape, MambaShape

MlpKind = Literal["gated", "plain"]
Activation = Literal["silu", "gelu", "relu"]
NormKind = Literal["rmsnorm", "layernorm"]
PositionKind = Literal["rope", "alibi", "learned", "none"]


@dataclass(frozen=True, slots=True)
class MlaShape:
    """DeepSeek multi-head latent attention ranks (elements, not bytes); `q_lora_rank` 0 is a
    full-rank query projection (config `q_lora_rank` null: DeepSeek-V2-Lite, Kimi Linear)."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True, slots=True)
class DsaShape:
    """DeepSeek sparse attention (DeepSeek-V3.2): a lightning indexer of `index_n_heads` heads of
    `index_head_dim` scores every cached key, and each query attends its `index_topk` best."""

    index_n_heads: int
    index_head_dim: int
    index_topk: int

    @property
    def key_bytes(self) -> float:
        """Indexer-cache bytes per token and layer: the fp8 index key and its fp32 scale [B]
        (vLLM's indexer cache, vllm/v1/attention/backends/mla/indexer.py)."""
        return self.index_head_dim * 1.0 + 4.0


@dataclass(frozen=True, slots=True)
class AttentionShape:
    """The attention of one kind of layer where it differs from the model's top-level fields:
    query heads, KV heads, and the head sizes of queries/keys (`head_dim`) and of values
    (`v_head_dim`), all in elements (Gemma 4's sliding layers: 8 KV heads of 256 beside full
    layers of 2 of 512; MiMo-V2-Flash's: 8 KV heads beside 4, keys of 192 and values of 128)."""

    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    v_head_dim: int


@dataclass(frozen=True, slots=True)
class ModelArchitecture:
    """A decoder-only transformer, as in a Hugging Face config.

    Sizes are element counts. `intermediate_size` is the FFN width of dense layers;
    `moe_intermediate_size` that of each routed expert. `num_moe_layers` of the
    `num_layers` use a mixture-of-experts MLP (the rest are dense), and
    `num_sliding_window_layers` attend only to the last `sliding_window_tokens` tokens.
    `fp8_block_scaled` marks a checkpoint whose FP8 weights carry one scale per 128 x 128 block
    (Hugging Face `quantization_config.weight_block_size`), which serving engines run with
    block-scaled kernels of their own (see `shards.expert_stream_bytes`). `int4_group_size` is
    the weights per scale of an int4 (AWQ/GPTQ) checkpoint (`quantization_config.group_size`;
    0: one scale per output channel), which sets the scale bytes stored beside int4 weights.
    `sandwich_norms` marks layers that also normalise each sub-layer's output before its
    residual add (Gemma 2 and 3: post_attention_layernorm and post_feedforward_layernorm beside
    the two pre-norms), 4 norms per layer instead of 2. `norm_unit_offset` marks an RMSNorm that
    scales by (1 + weight) (Gemma's GemmaRMSNorm), which some engines have no fused kernel for
    (see `workload.Deployment.unfused_norms`).

    A second attention shape: with `sliding_attention` the sliding-window layers have their own
    heads and head sizes (their own QKV and output projections, attention kernel and KV-cache
    width); the top-level fields are then those of the full-attention layers. `v_head_dim`
    (None: `head_dim`) is the value head size of the top-level shape where it differs from the
    keys'. `values_from_keys`: the top-level layers project keys only and attend with them as
    values too (Gemma 4's `attention_k_eq_v`: no v_proj weights, the cache still holds keys
    and values).

    Hybrid stacks: `num_mamba_layers` layers mix tokens with a Mamba-2 mixer (`mamba`) and
    `num_delta_net_layers` with gated DeltaNet (`delta_net`) instead of attention;
    `num_mixer_free_layers` have no token mixer (Nemotron-H's MLP-only blocks) and
    `num_mlp_free_layers` no MLP (Nemotron-H's Mamba and attention blocks). The rest of the
    `num_layers` blocks attend (`num_attention_layers`, of which `num_sliding_window_layers`
    through a window); every block has a norm and a residual add per sub-layer it holds.
    `attention_output_gate`: q_proj also projects a per-element gate on the attention output
    (Qwen3-Next's `attn_output_gate`), doubling its query width. `parallel_mixers`: attention
    and the Mamba-2 mixer run side by side on the same blocks, their outputs summed (Falcon-H1).

    Latent MoE: with `moe_latent_size` the routed experts read and write a token projected down
    to that width (Nemotron 3 Super/Ultra: fc1_latent_proj hidden -> latent before dispatch,
    fc2_latent_proj latent -> hidden after combine, both replicated on every GPU); the router
    and the shared expert keep the full hidden width.

    Cross-attention layers (`num_cross_attention_layers`, Llama 3.2 Vision's): decoder layers,
    beside the `num_layers` that run, that attend to image tokens; a text-only request has none,
    and the engines skip those layers, so they hold weights (an attention block and a dense MLP
    each, shaped as a self-attention layer's) but do no work and keep no KV cache.
    """

    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_context_tokens: int = 131072
    mlp: MlpKind = "gated"
    activation: Activation = "silu"
    norm: NormKind = "rmsnorm"
    position: PositionKind = "rope"
    qkv_bias: bool = False
    parallel_residual: bool = False
    tie_word_embeddings: bool = False
    sliding_window_tokens: int | None = None
    num_sliding_window_layers: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int | None = None
    num_moe_layers: int = 0
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int | None = None
    mla: MlaShape | None = None
    fp8_block_scaled: bool = False
    int4_group_size: int = 128
    sandwich_norms: bool = False
    norm_unit_offset: bool = False
    mamba: MambaShape | None = None
    num_mamba_layers: int = 0
    delta_net: DeltaNetShape | None = None
    num_delta_net_layers: int = 0
    num_mixer_free_layers: int = 0
    num_mlp_free_layers: int = 0
    attention_output_gate: bool = False
    parallel_mixers: bool = False
    dsa: DsaShape | None = None
    moe_latent_size: int | None = None
    num_cross_attention_layers: int = 0
    v_head_dim: int | None = None
    values_from_keys: bool = False
    sliding_attention: AttentionShape | None = None

    @property
    def num_attention_layers(self) -> int:
        """Blocks whose token mixer is (or, with `parallel_mixers`, includes) attention."""
        recurrent = 0 if self.parallel_mixers else self.num_mamba_layers + self.num_delta_net_layers
        return self.num_layers - recurrent - self.num_mixer_free_layers

    @property
    def num_mixer_layers(self) -> int:
        """Blocks with a token mixer (attention or recurrent)."""
        return self.num_layers - self.num_mixer_free_layers

    @property
    def num_mlp_layers(self) -> int:
        """Blocks with an MLP (dense or mixture of experts)."""
        return self.num_layers - self.num_mlp_free_layers

    @property
    def num_dense_mlp_layers(self) -> int:
        return self.num_mlp_layers - (self.num_moe_layers if self.is_moe else 0)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.num_moe_layers > 0

    @property
    def capped_window(self) -> int | None:
        """Keys a query of a capped attention layer attends at most: the sliding window, or
        DSA's top-k (as many pairs and keys read as a window of that size; DSA still caches
        every key, see service.core.memory)."""
        if self.dsa is not None:
            return self.dsa.index_topk
        return self.sliding_window_tokens

    @property
    def num_capped_layers(self) -> int:
        """Layers whose attention span is capped at `capped_window` (DSA: every layer)."""
        return self.num_attention_layers if self.dsa is not None else self.num_sliding_window_layers

    @property
    def query_width(self) -> int:
        """Width of the concatenated query heads [elements]."""
        return self.num_attention_heads * self.head_dim

    @property
    def q_proj_width(self) -> int:
        """Output width of the query projection: the queries, and their gate if gated."""
        return self.query_width * (2 if self.attention_output_gate else 1)

    @property
    def kv_width(self) -> int:
        """Width of the keys (and of the values) of all KV heads [elements]."""
        return self.num_key_value_heads * self.head_dim

    @property
    def value_head_dim(self) -> int:
        """Value head size of the top-level attention shape [elements]."""
        return self.v_head_dim or self.head_dim

    @property
    def value_width(self) -> int:
        """Width of the values of all KV heads [elements] (the keys' with equal head sizes)."""
        return self.num_key_value_heads * self.value_head_dim

    @property
    def kv_proj_width(self) -> int:
        """Output width of the key and value projections: keys only with `values_from_keys`."""
        return self.kv_width + (0 if self.values_from_keys else self.value_width)

    def sliding_layers(self) -> ModelArchitecture:
        """The model as its sliding-window layers see it: `sliding_attention`'s heads and head
        sizes in the top-level fields (the model itself when it has no second shape)."""
        shape = self.sliding_attention
        if shape is None:
            return self
        return _sliding_layers(self, shape)

    @property
    def expert_width(self) -> int:
        """FFN width of one routed expert [elements]."""
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def expert_input_width(self) -> int:
        """Width of the rows routed experts read and write [elements]: the latent of a latent
        MoE, else the hidden size."""
        return self.moe_latent_size or self.hidden_size

    @property
    def shared_expert_width(self) -> int:
        """Total FFN width of the shared experts of an MoE layer [elements]."""
        if self.shared_expert_intermediate_size is not None:
            return self.shared_expert_intermediate_size
        return self.num_shared_experts * self.expert_width


@lru_cache(maxsize=64)
def _sliding_layers(arch: ModelArchitecture, shape: AttentionShape) -> ModelArchitecture:
    return replace(
        arch,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        head_dim=shape.head_dim,
        v_head_dim=shape.v_head_dim,
        values_from_keys=False,
        sliding_attention=None,
    )


def default_head_dim(hidden_size: int, num_attention_heads: int) -> int:
    """hidden_size / num_attention_heads, for architectures that do not state head_dim."""
    if num_attention_heads <= 0 or hidden_size % num_attention_heads != 0:
        raise InvalidArchitecture(
            f"num_attention_heads ({num_attention_heads}) must divide hidden_size ({hidden_size}) "
            "when head_dim is not given; give head_dim explicitly or change the head count",
            field="num_attention_heads",
        )
    return hidden_size // num_attention_heads


def validate_architecture(arch: ModelArchitecture) -> None:
    """Raise InvalidArchitecture naming the first inconsistent field of `arch`."""
    positive = {
        "hidden_size": arch.hidden_size,
        "num_layers": arch.num_layers,
        "num_attention_heads": arch.num_attention_heads,
        "num_key_value_heads": arch.num_key_value_heads,
        "head_dim": arch.head_dim,
        "intermediate_size": arch.intermediate_size,
        "vocab_size": arch.vocab_size,
        "max_context_tokens": arch.max_context_tokens,
    }
    for name, value in positive.items():
        if value <= 0:
            raise InvalidArchitecture(f"{name} must be positive, got {value}", field=name)
    if arch.num_attention_heads % arch.num_key_value_heads != 0:
        raise InvalidArchitecture(
            f"num_attention_heads ({arch.num_attention_heads}) must be a multiple of "
            f"num_key_value_heads ({arch.num_key_value_heads})",
            field="num_key_value_heads",
        )
    _validate_layer_mix(arch)
    _validate_second_shape(arch)
    _validate_moe(arch)
    _validate_sliding_window(arch)
    if arch.dsa is not None and (arch.mla is None or arch.num_sliding_window_layers):
        raise InvalidArchitecture(
            "DSA sparse attention is priced on MLA layers without sliding windows", field="dsa"
        )


def _validate_layer_mix(arch: ModelArchitecture) -> None:
    counts = {
        "num_mamba_layers": (arch.num_mamba_layers, arch.mamba),
        "num_delta_net_layers": (arch.num_delta_net_layers, arch.delta_net),
        "num_mixer_free_layers": (arch.num_mixer_free_layers, True),
        "num_mlp_free_layers": (arch.num_mlp_free_layers, True),
    }
    for name, (count, shape) in counts.items():
        if count < 0:
            raise InvalidArchitecture(f"{name} must not be negative", field=name)
        if count and shape is None:
            raise InvalidArchitecture(f"{name} given without the mixer's shape", field=name)
    recurrent = arch.num_mamba_layers + arch.num_delta_net_layers
    if arch.parallel_mixers and recurrent > arch.num_mixer_layers:
        raise InvalidArchitecture(
            "parallel recurrent mixers exceed the blocks with a mixer", field="num_mamba_layers"
        )
    if arch.num_attention_layers < 0 or arch.num_mixer_layers <= 0:
        raise InvalidArchitecture(
            "recurrent and mixer-free layers must leave at least one mixer and no negative "
            f"number of attention layers out of num_layers ({arch.num_layers})",
            field="num_layers",
        )
    if arch.num_cross_attention_layers < 0:
        raise InvalidArchitecture(
            "num_cross_attention_layers must not be negative", field="num_cross_attention_layers"
        )
    if arch.num_mlp_free_layers > arch.num_layers:
        raise InvalidArchitecture("num_mlp_free_layers exceeds num_layers", field="num_layers")
    if (
        arch.mamba is not None
        and min(
            arch.mamba.num_heads, arch.mamba.head_dim, arch.mamba.state_size, arch.mamba.n_groups
        )
        <= 0
    ):
        raise InvalidArchitecture("Mamba-2 sizes must be positive", field="mamba")
    if arch.delta_net is not None:
        d = arch.delta_net
        if min(d.num_key_heads, d.num_value_heads, d.key_head_dim, d.value_head_dim) <= 0:
            raise InvalidArchitecture("gated-DeltaNet sizes must be positive", field="delta_net")
        if d.num_value_heads % d.num_key_heads:
            raise InvalidArchitecture(
                "linear value heads must be a multiple of the key heads", field="delta_net"
            )


def _validate_moe(arch: ModelArchitecture) -> None:
    if arch.num_experts < 0 or arch.experts_per_token < 0:
        raise InvalidArchitecture("expert counts must not be negative", field="num_experts")
    if arch.num_experts == 0:
        if arch.num_moe_layers or arch.experts_per_token or arch.moe_latent_size:
            raise InvalidArchitecture(
                "num_moe_layers/experts_per_token given without num_experts", field="num_experts"
            )
        return
    if not 1 <= arch.experts_per_token <= arch.num_experts:
        raise InvalidArchitecture(
            f"experts_per_token must be between 1 and num_experts ({arch.num_experts}), "
            f"got {arch.experts_per_token}",
            field="experts_per_token",
        )
    if arch.moe_latent_size is not None and arch.moe_latent_size <= 0:
        raise InvalidArchitecture("moe_latent_size must be positive", field="moe_latent_size")
    if not 0 < arch.num_moe_layers <= arch.num_mlp_layers:
        raise InvalidArchitecture(
            f"num_moe_layers must be between 1 and the layers with an MLP ({arch.num_mlp_layers})",
            field="num_moe_layers",
        )


def _validate_sliding_window(arch: ModelArchitecture) -> None:
    if arch.num_sliding_window_layers == 0:
        return
    if arch.sliding_window_tokens is None or arch.sliding_window_tokens <= 0:
        raise InvalidArchitecture(
            "num_sliding_window_layers given without a positive sliding_window_tokens",
            field="sliding_window_tokens",
        )
    if not 0 < arch.num_sliding_window_layers <= arch.num_attention_layers:
        raise InvalidArchitecture(
            "num_sliding_window_layers must not exceed the attention layers",
            field="num_sliding_window_layers",
        )


def _validate_second_shape(arch: ModelArchitecture) -> None:
    if arch.v_head_dim is not None and arch.v_head_dim <= 0:
        raise InvalidArchitecture("v_head_dim must be positive", field="v_head_dim")
    if (arch.v_head_dim is not None or arch.values_from_keys) and arch.mla is not None:
        raise InvalidArchitecture(
            "v_head_dim and values_from_keys describe GQA layers, not MLA", field="v_head_dim"
        )
    shape = arch.sliding_attention
    if shape is None:
        return
    if arch.mla is not None or arch.dsa is not None or not arch.num_sliding_window_layers:
        raise InvalidArchitecture(
            "sliding_attention is the shape of GQA sliding-window layers: it needs "
            "num_sliding_window_layers and no MLA",
            field="sliding_attention",
        )
    sizes = (shape.num_attention_heads, shape.num_key_value_heads, shape.head_dim, shape.v_head_dim)
    if min(sizes) <= 0 or shape.num_attention_heads % shape.num_key_value_heads:
        raise InvalidArchitecture(
            "sliding_attention's sizes must be positive and its query heads a multiple of its "
            "KV heads",
            field="sliding_attention",
        )
