"""Readers of stacks with Mamba-2 state-space layers, alone or mixed with attention and MLP/MoE
layers, as each model's transformers config class and vLLM model read them (layer pattern
strings and lists, mixer sizes)."""

from __future__ import annotations

from service.catalog.hf_config.layers import set_experts
from service.catalog.hf_config.reading import ClassDefaults, ConfigKeys, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import InvalidArchitecture
from service.core.mixers import MambaShape

# NemotronHConfig (transformers, and vLLM's copy in vllm/transformers_utils/configs/nemotron_h.py)
NEMOTRON_H = ClassDefaults(
    131072, 4096, 21504, 52, 32, 8, 4096, False, hidden_act="relu2", head_dim=128
)
NEMOTRON_H_KEYS = ConfigKeys(hidden_act=("mlp_hidden_act",))
# hybrid_override_pattern characters and layers_block_type entries, by block kind
_NEMOTRON_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def _nemotron_blocks(view: ConfigView) -> tuple[list[str], str]:
    """Each block's kind (mamba, attention, mlp, moe) and the key they were read from."""
    listed = view.text_list("layers_block_type")
    if listed is not None:
        key, blocks = "layers_block_type", listed
    else:
        key = "hybrid_override_pattern"
        pattern = view.text(key, "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-")
        blocks = [_NEMOTRON_BLOCKS.get(c, c) for c in pattern]
    unknown = sorted(set(blocks) - set(_NEMOTRON_BLOCKS.values()))
    if unknown:
        raise InvalidArchitecture(
            f"{view.field(key)} holds block types this service cannot price: {', '.join(unknown)}",
            field=view.field(key),
        )
    return blocks, key


def read_nemotron_h(view: ConfigView) -> Reading:
    """NemotronHConfig (Nemotron-H, Nemotron-Nano-9B/12B-v2, Nemotron 3): one sub-layer per
    block, a Mamba-2 mixer (M), attention without positional encoding (*), a squared-ReLU MLP
    (-) or a mixture of squared-ReLU experts with a shared expert (E), each with its own
    RMSNorm and residual add; with `moe_latent_size` (Nemotron 3 Super/Ultra) the routed
    experts work in that latent (ModelArchitecture.moe_latent_size)."""
    reading = read_decoder(view, NEMOTRON_H, NEMOTRON_H_KEYS)
    blocks, key = _nemotron_blocks(view)
    if "num_hidden_layers" in view.raw and view.raw["num_hidden_layers"] != len(blocks):
        raise InvalidArchitecture(
            f"{view.field(key)} lists {len(blocks)} blocks, num_hidden_layers is "
            f"{view.raw['num_hidden_layers']}",
            field=view.field(key),
        )
    count = blocks.count
    reading.set("num_layers", len(blocks), key)
    reading.set("mlp", "plain")
    reading.set("position", "none")
    reading.set("num_mamba_layers", count("mamba"), key)
    reading.set("num_mixer_free_layers", count("mlp") + count("moe"), key)
    reading.set("num_mlp_free_layers", count("mamba") + count("attention"), key)
    reading.set("mamba", _nemotron_mamba(view), "mamba_num_heads")
    set_experts(
        reading,
        experts=view.count("n_routed_experts", 8) if count("moe") else 0,
        experts_key="n_routed_experts",
        top_k=view.size("num_experts_per_tok", 2),
        expert_width=view.size("moe_intermediate_size", 7688),
        moe_layers=count("moe"),
        shared_width=view.count("n_shared_experts", 1)
        * view.size("moe_shared_expert_intermediate_size", 7688),
    )
    # Nemotron 3 Super/Ultra: routed experts in a latent (vLLM's NemotronHMoE,
    # vllm/model_executor/models/nemotron_h.py: fc1/fc2_latent_proj as ReplicatedLinear,
    # FusedMoE over hidden_size=moe_latent_size; the gate and shared expert on hidden)
    latent = view.optional_size("moe_latent_size", None)
    if count("moe"):
        reading.set("num_moe_layers", count("moe"), key)
        if latent is not None:
            reading.set("moe_latent_size", latent, "moe_latent_size")
    reading.notes.append("squared ReLU priced as ReLU (one more multiply per element)")
    return reading


def _nemotron_mamba(view: ConfigView) -> MambaShape:
    return MambaShape(
        num_heads=view.size("mamba_num_heads", 128),
        head_dim=view.size("mamba_head_dim", 64),
        state_size=view.size("ssm_state_size", 128),
        n_groups=view.size(("n_groups", "mamba_n_groups"), 8),
        conv_kernel=view.size(("conv_kernel", "mamba_d_conv"), 4),
        chunk_size=view.size(("chunk_size", "mamba_chunk_size"), 128),
        state_fp32=view.text("mamba_ssm_cache_dtype", "auto") == "float32",
    )


# GraniteMoeHybridConfig, FalconH1Config, Mamba2Config (transformers)
GRANITE_HYBRID = ClassDefaults(32000, 4096, 11008, 32, 32, None, 2048, False)
FALCON_H1 = ClassDefaults(128000, 4096, 14336, 32, 32, 8, 8192, False)
MAMBA2 = ClassDefaults(32768, 4096, None, 64, 128, None, 1_000_000, False)


def _mamba_sized(view: ConfigView, inner: int, chunk: int, groups: int, state: int) -> MambaShape:
    """The `mamba_*` keys of Bamba-derived configs; `mamba_d_head` "auto" is d_inner / heads."""
    heads = view.size("mamba_n_heads", 128)
    head_dim = view.raw.get("mamba_d_head", "auto")
    if head_dim == "auto" or head_dim is None:
        if inner % heads:
            raise InvalidArchitecture(
                f"{view.field('mamba_n_heads')} ({heads}) must divide the Mamba width ({inner})",
                field=view.field("mamba_n_heads"),
            )
        head_dim = inner // heads
    else:
        head_dim = view.size("mamba_d_head", None)
    return MambaShape(
        num_heads=heads,
        head_dim=head_dim,
        state_size=view.size("mamba_d_state", state),
        n_groups=view.size("mamba_n_groups", groups),
        conv_kernel=view.size("mamba_d_conv", 4),
        chunk_size=view.size("mamba_chunk_size", chunk),
    )


def read_granitemoehybrid(view: ConfigView) -> Reading:
    """GraniteMoeHybridConfig (Granite 4.0-H): each layer a Mamba-2 mixer or attention
    (`layer_types`, all Mamba when absent), then a mixture of `num_local_experts` experts of
    width `intermediate_size` with a shared MLP of `shared_intermediate_size`, or that shared
    MLP alone when there are no experts; RoPE only where `position_embedding_type` is rope."""
    reading = read_decoder(view, GRANITE_HYBRID)
    layers: int = reading.values["num_layers"]
    types = view.text_list("layer_types") or ["mamba"] * layers
    if len(types) != layers or set(types) - {"mamba", "attention"}:
        raise InvalidArchitecture(
            f"{view.field('layer_types')} must list mamba or attention for each of the "
            f"{layers} layers",
            field=view.field("layer_types"),
        )
    hidden: int = reading.values["hidden_size"]
    inner = view.size("mamba_expand", 2) * hidden
    reading.set("mamba", _mamba_sized(view, inner, 256, 1, 256), "mamba_n_heads")
    reading.set("num_mamba_layers", types.count("mamba"), "layer_types")
    if view.text("position_embedding_type", "nope") != "rope":
        reading.set("position", "none")
    shared = view.size("shared_intermediate_size", 1024)
    experts = view.count("num_local_experts", 8)
    if experts:
        set_experts(
            reading,
            experts=experts,
            experts_key="num_local_experts",
            top_k=view.size("num_experts_per_tok", 2),
            expert_width=reading.values["intermediate_size"],
            moe_layers=layers,
            shared_width=shared,
        )
    else:
        reading.set("intermediate_size", shared, "shared_intermediate_size")
    return reading


def read_falcon_h1(view: ConfigView) -> Reading:
    """FalconH1Config (Falcon-H1): attention and a Mamba-2 mixer side by side in every layer,
    their outputs summed, then a SwiGLU MLP; the mixer `mamba_d_ssm` wide (else expand x
    hidden)."""
    reading = read_decoder(view, FALCON_H1)
    layers: int = reading.values["num_layers"]
    inner = (
        view.optional_size("mamba_d_ssm", 1024)
        or view.size("mamba_expand", 2) * (reading.values["hidden_size"])
    )
    reading.set("mamba", _mamba_sized(view, inner, 256, 1, 256), "mamba_n_heads")
    reading.set("num_mamba_layers", layers, "num_hidden_layers")
    reading.set("parallel_mixers", True)
    if not view.flag("mamba_rms_norm", False):
        reading.notes.append("the Mamba output gate without its RMSNorm priced as a gated norm")
    return reading


def read_mamba2(view: ConfigView) -> Reading:
    """Mamba2Config (Mamba-Codestral): Mamba-2 mixers alone, no MLP and no attention (the
    attention fields below are the mixer's heads, which no kernel reads)."""
    hidden = view.size("hidden_size", 4096)
    heads = view.size("num_heads", 128)
    head_dim = view.size("head_dim", view.size("expand", 2) * hidden // heads)
    layers = view.size("num_hidden_layers", 64)
    reading = Reading(view)
    for name, value, key in (
        ("hidden_size", hidden, "hidden_size"),
        ("num_layers", layers, "num_hidden_layers"),
        ("num_attention_heads", heads, "num_heads"),
        ("num_key_value_heads", heads, "num_heads"),
        ("head_dim", head_dim, "head_dim"),
        ("intermediate_size", hidden, "hidden_size"),
        ("vocab_size", view.size("vocab_size", 32768), "vocab_size"),
    ):
        reading.set(name, value, key)
    reading.set("tie_word_embeddings", view.flag("tie_word_embeddings", False))
    reading.set("position", "none")
    mamba = MambaShape(
        num_heads=heads,
        head_dim=head_dim,
        state_size=view.size("state_size", 128),
        n_groups=view.size("n_groups", 8),
        conv_kernel=view.size("conv_kernel", 4),
        chunk_size=view.size("chunk_size", 256),
    )
    reading.set("mamba", mamba, "num_heads")
    reading.set("num_mamba_layers", layers, "num_hidden_layers")
    reading.set("num_mlp_free_layers", layers, "num_hidden_layers")
    return reading


BAMBA = ClassDefaults(128000, 4096, 14336, 32, 32, 8, 262144, False)


def read_bamba(view: ConfigView) -> Reading:
    """BambaConfig (Bamba): attention on the layers in `attn_layer_indices`, Mamba-2 on the
    rest, a SwiGLU MLP on every layer."""
    reading = read_decoder(view, BAMBA)
    layers: int = reading.values["num_layers"]
    attention = set(view.int_list("attn_layer_indices") or ())
    if any(i >= layers for i in attention):
        raise InvalidArchitecture(
            f"{view.field('attn_layer_indices')} names a layer beyond the {layers}",
            field=view.field("attn_layer_indices"),
        )
    inner = view.size("mamba_expand", 2) * reading.values["hidden_size"]
    reading.set("mamba", _mamba_sized(view, inner, 256, 1, 256), "mamba_n_heads")
    reading.set("num_mamba_layers", layers - len(attention), "attn_layer_indices")
    return reading


JAMBA = ClassDefaults(65536, 4096, 14336, 32, 32, 8, 262144, False)


def read_jamba(view: ConfigView) -> Reading:
    """JambaConfig (Jamba, Jamba 1.5/1.7): attention without positional encoding on every
    `attn_layer_period`-th layer from `attn_layer_offset`, Mamba-1 mixers on the rest (d_inner
    `mamba_expand` x hidden, dt rank `mamba_dt_rank`, "auto" = ceil(hidden / 16)); a mixture of
    `num_experts` SwiGLU experts on every `expert_layer_period`-th layer from
    `expert_layer_offset`, a SwiGLU MLP on the others."""
    reading = read_decoder(view, JAMBA)
    layers: int = reading.values["num_layers"]
    hidden: int = reading.values["hidden_size"]
    period, offset = view.size("attn_layer_period", 8), view.count("attn_layer_offset", 4)
    attention = sum(1 for i in range(layers) if i % period == offset)
    expert_period = view.size("expert_layer_period", 2)
    expert_offset = view.count("expert_layer_offset", 1)
    rank = view.raw.get("mamba_dt_rank", "auto")
    dt_rank = -(-hidden // 16) if rank in ("auto", None) else view.size("mamba_dt_rank", None)
    inner = view.size("mamba_expand", 2) * hidden
    mamba = MambaShape(
        num_heads=inner,
        head_dim=1,
        state_size=view.size("mamba_d_state", 16),
        n_groups=1,
        conv_kernel=view.size("mamba_d_conv", 4),
        dt_rank=dt_rank,
    )
    reading.set("mamba", mamba, "mamba_expand")
    reading.set("num_mamba_layers", layers - attention, "attn_layer_period")
    reading.set("position", "none")
    experts = view.count("num_experts", 16)
    if experts > 1:
        set_experts(
            reading,
            experts=experts,
            experts_key="num_experts",
            top_k=view.size("num_experts_per_tok", 2),
            expert_width=reading.values["intermediate_size"],
            moe_layers=sum(1 for i in range(layers) if i % expert_period == expert_offset),
        )
    reading.notes.append("Mamba-1's RMSNorms on dt, B and C not priced")
    return reading


def read_mamba(view: ConfigView) -> Reading:
    """MambaConfig and FalconMambaConfig (Mamba, Falcon-Mamba): Mamba-1 mixers alone, no MLP
    and no attention; d_inner `intermediate_size` (else `expand` x hidden), dt rank
    `time_step_rank` ("auto": ceil(hidden / 16)). The attention fields below are placeholders
    no kernel reads (one head of hidden_size)."""
    hidden = view.size("hidden_size", 768)
    layers = view.size("num_hidden_layers", 32)
    inner = view.size("intermediate_size", view.size("expand", 2) * hidden)
    rank = view.raw.get("time_step_rank", "auto")
    dt_rank = -(-hidden // 16) if rank in ("auto", None) else view.size("time_step_rank", None)
    reading = Reading(view)
    for name, value, key in (
        ("hidden_size", hidden, "hidden_size"),
        ("num_layers", layers, "num_hidden_layers"),
        ("num_attention_heads", 1, None),
        ("num_key_value_heads", 1, None),
        ("head_dim", hidden, "hidden_size"),
        ("intermediate_size", inner, "intermediate_size"),
        ("vocab_size", view.size("vocab_size", 50280), "vocab_size"),
    ):
        reading.set(name, value, key)
    reading.set("tie_word_embeddings", view.flag("tie_word_embeddings", True))
    reading.set("position", "none")
    mamba = MambaShape(
        num_heads=inner,
        head_dim=1,
        state_size=view.size("state_size", 16),
        n_groups=1,
        conv_kernel=view.size("conv_kernel", 4),
        dt_rank=dt_rank,
    )
    reading.set("mamba", mamba, "intermediate_size")
    reading.set("num_mamba_layers", layers, "num_hidden_layers")
    reading.set("num_mlp_free_layers", layers, "num_hidden_layers")
    if view.raw.get("model_type") == "falcon_mamba":
        reading.notes.append("Falcon-Mamba's RMSNorms on dt, B and C not priced")
    return reading
