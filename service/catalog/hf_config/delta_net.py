"""Readers of stacks with gated-DeltaNet linear attention (Qwen3-Next, Qwen3.5): which layers
attend fully and which run the delta rule (`layer_types`, else every `full_attention_interval`-th
layer attends), the linear heads, and the MLP or mixture of experts beside them."""

from __future__ import annotations

from service.catalog.hf_config.layers import note_mtp_layers, set_experts, sparse_step_layers
from service.catalog.hf_config.reading import ClassDefaults, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import InvalidArchitecture
from service.core.mixers import DeltaNetShape

# Qwen3NextConfig (Qwen3-Next-80B-A3B's defaults), Qwen3_5TextConfig, Qwen3_5MoeTextConfig
QWEN3_NEXT = ClassDefaults(151936, 2048, 5632, 48, 16, 2, 32768, False, head_dim=256)
QWEN3_5_TEXT = ClassDefaults(248320, 4096, 12288, 32, 16, 4, 32768, False, head_dim=256)
QWEN3_5_MOE_TEXT = ClassDefaults(248320, 2048, None, 40, 16, 2, 32768, False, head_dim=256)
_LAYER_TYPES = ("full_attention", "linear_attention")
NOTE = "partial RoPE and QK-norm priced as plain attention"


def _linear_layers(reading: Reading) -> None:
    """Gated DeltaNet on the `linear_attention` layers; q_proj gated on the attention ones."""
    view = reading.view
    layers: int = reading.values["num_layers"]
    interval = view.size("full_attention_interval", 4)
    types = view.text_list("layer_types") or [
        "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)
    ]
    if len(types) != layers or set(types) - set(_LAYER_TYPES):
        raise InvalidArchitecture(
            f"{view.field('layer_types')} must list full_attention or linear_attention for each "
            f"of the {layers} layers",
            field=view.field("layer_types"),
        )
    reading.set("num_delta_net_layers", types.count("linear_attention"), "layer_types")
    shape = DeltaNetShape(
        num_key_heads=view.size("linear_num_key_heads", 16),
        num_value_heads=view.size("linear_num_value_heads", 32),
        key_head_dim=view.size("linear_key_head_dim", 128),
        value_head_dim=view.size("linear_value_head_dim", 128),
        conv_kernel=view.size("linear_conv_kernel_dim", 4),
        state_fp32=view.text("mamba_ssm_dtype", "auto") == "float32",
    )
    reading.set("delta_net", shape, "linear_num_value_heads")
    reading.set("attention_output_gate", view.flag("attn_output_gate", True))
    reading.notes.append(NOTE)


def _experts(reading: Reading, experts: int, top_k: int, dense_only: list[int] | None) -> None:
    view = reading.view
    set_experts(
        reading,
        experts=view.count("num_experts", experts),
        experts_key="num_experts",
        top_k=view.size("num_experts_per_tok", top_k),
        expert_width=view.size("moe_intermediate_size", 512),
        moe_layers=sparse_step_layers(reading, view.size("decoder_sparse_step", 1), dense_only),
        shared_width=view.size("shared_expert_intermediate_size", 512),
    )


def read_qwen3_next(view: ConfigView) -> Reading:
    """Qwen3NextConfig (Qwen3-Next): 3 of every 4 layers gated DeltaNet; 512 experts, top 10,
    and a shared expert on every `decoder_sparse_step`-th layer not in `mlp_only_layers`."""
    reading = read_decoder(view, QWEN3_NEXT)
    _linear_layers(reading)
    _experts(reading, 512, 10, view.int_list("mlp_only_layers"))
    note_mtp_layers(reading, ("num_nextn_predict_layers", "mtp_num_hidden_layers"))
    return reading


def read_qwen3_5_text(view: ConfigView) -> Reading:
    """Qwen3_5TextConfig (Qwen3.5 dense): gated DeltaNet and gated attention, a SwiGLU MLP on
    every layer."""
    reading = read_decoder(view, QWEN3_5_TEXT)
    _linear_layers(reading)
    return reading


def read_qwen3_5_moe_text(view: ConfigView) -> Reading:
    """Qwen3_5MoeTextConfig (Qwen3.5 MoE): 256 experts, top 8, and a shared expert on every
    layer."""
    reading = read_decoder(view, QWEN3_5_MOE_TEXT)
    _linear_layers(reading)
    _experts(reading, 256, 8, None)
    return reading
