"""Readers of hybrid stacks that mix recurrent token mixers (Mamba-2, gated DeltaNet) with
attention and MLP/MoE layers, as each model's transformers config class and vLLM model read
them (layer pattern strings and lists, mixer sizes)."""

from __future__ import annotations

from service.catalog.hf_config.layers import set_experts, sparse_step_layers
from service.catalog.hf_config.reading import ClassDefaults, ConfigKeys, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import InvalidArchitecture, UnsupportedArchitecture
from service.core.mixers import DeltaNetShape, MambaShape

# NemotronHConfig (transformers, and vLLM's copy in vllm/transformers_utils/configs/nemotron_h.py)
NEMOTRON_H = ClassDefaults(
    131072, 4096, 21504, 52, 32, 8, 4096, False, hidden_act="relu2", head_dim=128
)
NEMOTRON_H_KEYS = ConfigKeys(hidden_act=("mlp_hidden_act",))
# Qwen3NextConfig (Qwen3-Next-80B-A3B's defaults)
QWEN3_NEXT = ClassDefaults(151936, 2048, 5632, 48, 16, 2, 32768, False, head_dim=256)
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
    RMSNorm and residual add."""
    reading = read_decoder(view, NEMOTRON_H, NEMOTRON_H_KEYS)
    blocks, key = _nemotron_blocks(view)
    if "num_hidden_layers" in view.raw and view.raw["num_hidden_layers"] != len(blocks):
        raise InvalidArchitecture(
            f"{view.field(key)} lists {len(blocks)} blocks, num_hidden_layers is "
            f"{view.raw['num_hidden_layers']}",
            field=view.field(key),
        )
    if view.raw.get("moe_latent_size") is not None:
        raise UnsupportedArchitecture(
            f"{view.field('moe_latent_size')}: latent mixture-of-experts projections are not "
            "priced yet",
            field=view.field("moe_latent_size"),
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
    if count("moe"):
        reading.set("num_moe_layers", count("moe"), key)
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


def read_qwen3_next(view: ConfigView) -> Reading:
    """Qwen3NextConfig (Qwen3-Next): `layer_types` (default: every `full_attention_interval`-th
    layer full attention, the rest gated DeltaNet), a mixture of experts on every
    `decoder_sparse_step`-th layer not in `mlp_only_layers`, with a shared expert."""
    reading = read_decoder(view, QWEN3_NEXT)
    layers: int = reading.values["num_layers"]
    interval = view.size("full_attention_interval", 4)
    types = view.text_list("layer_types") or [
        "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)
    ]
    if len(types) != layers or set(types) - {"full_attention", "linear_attention"}:
        raise InvalidArchitecture(
            f"{view.field('layer_types')} must list full_attention or linear_attention for each "
            f"of the {layers} layers",
            field=view.field("layer_types"),
        )
    reading.set("num_delta_net_layers", types.count("linear_attention"), "layer_types")
    reading.set(
        "delta_net",
        DeltaNetShape(
            num_key_heads=view.size("linear_num_key_heads", 16),
            num_value_heads=view.size("linear_num_value_heads", 32),
            key_head_dim=view.size("linear_key_head_dim", 128),
            value_head_dim=view.size("linear_value_head_dim", 128),
            conv_kernel=view.size("linear_conv_kernel_dim", 4),
            state_fp32=view.text("mamba_ssm_dtype", "auto") == "float32",
        ),
        "linear_num_value_heads",
    )
    step = view.size("decoder_sparse_step", 1)
    experts = view.count("num_experts", 512)
    set_experts(
        reading,
        experts=experts,
        experts_key="num_experts",
        top_k=view.size("num_experts_per_tok", 10),
        expert_width=view.size("moe_intermediate_size", 512),
        moe_layers=sparse_step_layers(reading, step, view.int_list("mlp_only_layers")),
        shared_width=view.size("shared_expert_intermediate_size", 512),
    )
    reading.set("attention_output_gate", view.flag("attn_output_gate", True))
    reading.notes.append("partial RoPE and QK-norm priced as plain attention")
    return reading
