"""Readers of stacks that interleave linear attention with softmax attention as their own
loaders read them: Kimi Linear (Kimi Delta Attention beside MLA) and MiniMax-Text-01 /
MiniMax-M1 (lightning attention beside grouped-query attention), both with routed experts."""

from __future__ import annotations

from service.catalog.hf_config.layers import note_mtp_layers, set_experts
from service.catalog.hf_config.mla import mla_shape, set_mla
from service.catalog.hf_config.reading import ClassDefaults, ConfigKeys, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import InvalidArchitecture
from service.core.mixers import DeltaNetShape

# KimiLinearConfig (configuration_kimi.py of moonshotai/Kimi-Linear-48B-A3B-Instruct): it sets no
# max_position_embeddings; the published config.json states model_max_length 1048576.
KIMI_LINEAR = ClassDefaults(163840, 4096, 11008, 32, 32, None, 1048576, False)
KIMI_LINEAR_KEYS = ConfigKeys(
    max_position_embeddings=("max_position_embeddings", "model_max_length")
)
_KIMI_MLA_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _one_based_layers(view: ConfigView, key: str, layers: int) -> list[int]:
    """A `linear_attn_config` layer list: 1-based indices (KimiLinearConfig.is_kda_layer reads
    layer i as KDA when i + 1 is listed)."""
    listed = view.int_list(key)
    if listed is None or any(not 1 <= i <= layers for i in listed):
        raise InvalidArchitecture(
            f"{view.field(key)} must list 1-based layer numbers up to {layers}",
            field=view.field(key),
        )
    return listed


def read_kimi_linear(view: ConfigView) -> Reading:
    """KimiLinearConfig (Kimi Linear): Kimi Delta Attention on the layers `linear_attn_config`
    lists in `kda_layers`, MLA without RoPE (`mla_use_nope`) on `full_attn_layers`; routed and
    shared experts on layer i when i >= first_k_dense_replace and i % moe_layer_freq == 0, a
    SwiGLU MLP of `intermediate_size` on the others."""
    reading = read_decoder(view, KIMI_LINEAR, KIMI_LINEAR_KEYS)
    layers: int = reading.values["num_layers"]
    linear = view.sub("linear_attn_config")
    if linear is None:
        raise InvalidArchitecture(
            f"{view.field('linear_attn_config')} is required",
            field=view.field("linear_attn_config"),
        )
    kda = _one_based_layers(linear, "kda_layers", layers)
    full = _one_based_layers(linear, "full_attn_layers", layers)
    if sorted(kda + full) != list(range(1, layers + 1)):
        raise InvalidArchitecture(
            f"{linear.field('kda_layers')} and {linear.field('full_attn_layers')} must split the "
            f"{layers} layers between them",
            field=linear.field("kda_layers"),
        )
    for key in _KIMI_MLA_KEYS:  # KimiLinearConfig defaults them to None: required
        view.size(key, None)
    set_mla(reading, mla_shape(view))
    heads, head_dim = linear.size("num_heads", None), linear.size("head_dim", None)
    shape = DeltaNetShape(
        num_key_heads=heads,
        num_value_heads=heads,
        key_head_dim=head_dim,
        value_head_dim=head_dim,
        conv_kernel=linear.size("short_conv_kernel_size", 4),
        state_fp32=True,  # vLLM's kda_state_dtype keeps the recurrent state in fp32
        rule="kda",
    )
    reading.set("delta_net", shape, "linear_attn_config.num_heads")
    reading.set("num_delta_net_layers", len(kda), "linear_attn_config.kda_layers")
    if view.flag("mla_use_nope", False):
        reading.set("position", "none")
    first, freq = view.count("first_k_dense_replace", 0), view.size("moe_layer_freq", 1)
    width = view.size("moe_intermediate_size", None) if view.raw.get("num_experts") else 0
    set_experts(
        reading,
        experts=view.count("num_experts", 0),
        experts_key="num_experts",
        top_k=view.size("num_experts_per_token", None) if width else 0,
        expert_width=width,
        moe_layers=sum(1 for i in range(layers) if i >= first and i % freq == 0),
        shared_width=view.count("num_shared_experts", 0) * width,
    )
    note_mtp_layers(reading, ("num_nextn_predict_layers",))
    return reading


# MiniMaxText01Config / MiniMaxM1Config (configuration_minimax_m1.py of
# MiniMaxAI/MiniMax-M1-80k) and transformers' MiniMaxConfig share these defaults.
MINIMAX = ClassDefaults(32000, 4096, 14336, 32, 32, 8, 4096 * 32, False)
_LIGHTNING_BLOCK = 256  # vLLM's lightning_attention block size (minimax_text_01.py)


def _minimax_linear_layers(view: ConfigView, layers: int) -> tuple[int, str]:
    """How many layers run lightning attention: `attn_type_list` (0 lightning, 1 softmax, the
    original checkpoints) or `layer_types` (transformers' MiniMaxConfig), else MiniMax-01's
    pattern, every 8th layer softmax."""
    kinds = view.int_list("attn_type_list")
    if kinds is not None:
        key, linear = "attn_type_list", [k == 0 for k in kinds]
        bad = len(kinds) != layers or bool(set(kinds) - {0, 1})
    else:
        types = view.text_list("layer_types") or [
            "full_attention" if (i + 1) % 8 == 0 else "linear_attention" for i in range(layers)
        ]
        key, linear = "layer_types", [t == "linear_attention" for t in types]
        bad = len(types) != layers or bool(set(types) - {"full_attention", "linear_attention"})
    if bad:
        raise InvalidArchitecture(
            f"{view.field(key)} must give lightning or softmax attention for each of the "
            f"{layers} layers",
            field=view.field(key),
        )
    return sum(linear), key


def read_minimax(view: ConfigView) -> Reading:
    """MiniMax-Text-01 and MiniMax-M1 (model_type minimax, minimax_text_01, minimax_m1):
    lightning attention on 7 of every 8 layers (its heads are the attention heads, each
    head_dim wide, its state fp32 as vLLM keeps it), grouped-query softmax attention with
    partial RoPE on the rest; `num_local_experts` experts of `intermediate_size` (top
    `num_experts_per_tok`) on every layer, and a shared MLP of `shared_intermediate_size` where
    that is non-zero."""
    reading = read_decoder(view, MINIMAX)
    layers: int = reading.values["num_layers"]
    linear, key = _minimax_linear_layers(view, layers)
    heads: int = reading.values["num_attention_heads"]
    head_dim: int = reading.values["head_dim"]
    shape = DeltaNetShape(
        num_key_heads=heads,
        num_value_heads=heads,
        key_head_dim=head_dim,
        value_head_dim=head_dim,
        conv_kernel=0,
        chunk_size=view.size("block", _LIGHTNING_BLOCK),
        state_fp32=True,
        rule="lightning",
    )
    reading.set("delta_net", shape, "num_attention_heads")
    reading.set("num_delta_net_layers", linear, key)
    shared = view.count("shared_intermediate_size", 0)
    set_experts(
        reading,
        experts=view.count("num_local_experts", 8),
        experts_key="num_local_experts",
        top_k=view.size("num_experts_per_tok", 2),
        expert_width=reading.values["intermediate_size"],
        moe_layers=layers,
        shared_width=shared or None,
    )
    reading.notes.append("partial RoPE priced as full RoPE (elementwise, negligible)")
    return reading
