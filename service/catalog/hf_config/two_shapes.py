"""Readers of decoders whose sliding-window layers have an attention shape of their own (heads,
KV heads, head sizes): Gemma 4 and Xiaomi MiMo-V2-Flash. The full-attention layers' shape goes
in the architecture's top-level fields, the sliding layers' in `sliding_attention`."""

from __future__ import annotations

from service.catalog.hf_config.gemma import GELU_TANH, GEMMA_KEYS, SOFTCAP_NOTE
from service.catalog.hf_config.layers import every_nth, set_experts, set_window, windowed_layers
from service.catalog.hf_config.reading import ClassDefaults, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.architecture import AttentionShape
from service.core.cost_model_errors import InvalidArchitecture, UnsupportedArchitecture

# Gemma4TextConfig's defaults (transformers configuration_gemma4.py).
GEMMA4_TEXT = ClassDefaults(262144, 2304, 9216, 30, 8, 4, 131072, True, GELU_TANH, head_dim=256)
# MiMo-V2-Flash's remote-code config has no class defaults the loader relies on: vLLM's
# MiMoV2FlashDecoderLayer reads the keys as attributes; these only fill the shared keys.
MIMO_V2_FLASH = ClassDefaults(152576, 4096, 16384, 48, 64, 4, 262144, False, head_dim=192)


def read_gemma4_text(view: ConfigView) -> Reading:
    """Gemma4TextConfig, as transformers' Gemma4TextAttention and Gemma4TextDecoderLayer build
    the layers: sliding layers (`layer_types`, default 5 of every 6, the last layer full) of
    `num_key_value_heads` x `head_dim` over a `sliding_window`; full layers of
    `global_head_dim` (default 512) and, with `attention_k_eq_v`, `num_global_key_value_heads`
    KV heads whose keys are also the values (no v_proj). With `enable_moe_block` every layer
    runs its dense MLP and, beside it, `num_experts` experts (top-`top_k_experts`) of
    `moe_intermediate_size`: priced as routed experts plus a shared expert of the dense width.
    Per-layer embeddings (`hidden_size_per_layer_input`, Gemma 4 E2B/E4B) and KV sharing across
    layers (`num_kv_shared_layers`) are refused."""
    for key, default in (("hidden_size_per_layer_input", 256), ("num_kv_shared_layers", 0)):
        if view.count(key, default):
            raise UnsupportedArchitecture(
                f"{view.field(key)}: Gemma 4's per-layer embeddings and cross-layer KV sharing "
                "(E2B/E4B) are not priced yet",
                field=view.field(key),
            )
    reading = read_decoder(view, GEMMA4_TEXT, GEMMA_KEYS)
    reading.set("norm_unit_offset", True)
    reading.set("sandwich_norms", True)
    layers = reading.values["num_layers"]
    sliding = windowed_layers(reading, lambda i: i < layers - 1 and every_nth(6)(i))
    set_window(reading, view.optional_size("sliding_window", 512), sliding, "sliding_window")
    local = AttentionShape(
        reading.values["num_attention_heads"],
        reading.values["num_key_value_heads"],
        reading.values["head_dim"],
        reading.values["head_dim"],
    )
    global_dim = view.size("global_head_dim", 512)
    shared_kv = view.flag("attention_k_eq_v", False)
    global_kv = local.num_key_value_heads
    if shared_kv:
        global_kv = view.size("num_global_key_value_heads", local.num_key_value_heads)
    _set_two_shapes(reading, local, global_kv, global_dim, global_dim, "num_global_key_value_heads")
    reading.set("values_from_keys", shared_kv)
    if view.flag("enable_moe_block", False):
        set_experts(
            reading,
            experts=view.size("num_experts", None),
            experts_key="num_experts",
            top_k=view.size("top_k_experts", None),
            expert_width=view.size("moe_intermediate_size", None),
            moe_layers=layers,
            shared_width=reading.values["intermediate_size"],
        )
        reading.notes.append(
            "MoE block beside the dense MLP on every layer: the dense MLP priced as a shared "
            "expert; the router's and the MoE branch's extra norms ignored"
        )
    reading.notes += [SOFTCAP_NOTE, "QK and V RMSNorm per head ignored (negligible cost)"]
    return reading


def read_mimo_v2_flash(view: ConfigView) -> Reading:
    """MiMo-V2-Flash's config, as vLLM's MiMoV2FlashDecoderLayer reads it: a layer whose
    `hybrid_layer_pattern` entry is 1 attends over `sliding_window_size` tokens with
    `swa_num_attention_heads`, `swa_num_key_value_heads`, `swa_head_dim` and `swa_v_head_dim`;
    the others with the top-level heads, `head_dim` and `v_head_dim` (None: head_dim). A layer
    whose `moe_layer_freq` entry is true runs `n_routed_experts` experts (top
    `num_experts_per_tok`) of `moe_intermediate_size`, the others a dense MLP of
    `intermediate_size`. The sliding layers' attention-sink biases (one logit per head) are
    left out (negligible cost)."""
    reading = read_decoder(view, MIMO_V2_FLASH)
    layers = reading.values["num_layers"]
    pattern = _layer_flags(view, "hybrid_layer_pattern", layers)
    window = view.size("sliding_window_size", None)
    set_window(reading, window, sum(pattern), "sliding_window_size")
    head_dim = reading.values["head_dim"]
    swa_dim = view.size("swa_head_dim", None)
    local = AttentionShape(
        view.size("swa_num_attention_heads", None),
        view.size("swa_num_key_value_heads", None),
        swa_dim,
        view.optional_size("swa_v_head_dim", None) or swa_dim,
    )
    v_dim = view.optional_size("v_head_dim", None) or head_dim
    kv = reading.values["num_key_value_heads"]
    _set_two_shapes(reading, local, kv, head_dim, v_dim, "num_key_value_heads")
    moe = sum(_layer_flags(view, "moe_layer_freq", layers)) if "moe_layer_freq" in view.raw else 0
    set_experts(
        reading,
        experts=view.count("n_routed_experts", 0),
        experts_key="n_routed_experts",
        top_k=view.size("num_experts_per_tok", 8),
        expert_width=view.size("moe_intermediate_size", None),
        moe_layers=moe,
    )
    reading.notes.append("attention-sink biases of the sliding layers ignored (negligible cost)")
    return reading


def _set_two_shapes(
    reading: Reading, local: AttentionShape, kv: int, head_dim: int, v_dim: int, kv_key: str
) -> None:
    """Full layers' KV heads and head sizes at the top level; the sliding layers' apart where
    they differ."""
    reading.set("num_key_value_heads", kv, kv_key)
    reading.set("head_dim", head_dim)
    reading.set("v_head_dim", None if v_dim == head_dim else v_dim)
    full = AttentionShape(reading.values["num_attention_heads"], kv, head_dim, v_dim)
    if reading.values.get("num_sliding_window_layers") and local != full:
        reading.set("sliding_attention", local)


def _layer_flags(view: ConfigView, key: str, layers: int) -> list[int]:
    """A per-layer list of 0/1 flags (`hybrid_layer_pattern`, `moe_layer_freq`), required."""
    flags = view.int_list(key)
    if flags is None or len(flags) != layers or any(f > 1 for f in flags):
        raise InvalidArchitecture(
            f"{view.field(key)} must list a 0 or 1 for each of the {layers} layers",
            field=view.field(key),
        )
    return flags
