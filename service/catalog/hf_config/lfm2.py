"""Reader of LFM2 (Liquid AI): a hybrid of gated short convolutions and grouped-query attention,
as transformers' Lfm2Config (models/lfm2/configuration_lfm2.py) and Lfm2Model
(models/lfm2/modeling_lfm2.py) read it.

Each layer mixes tokens by attention (`full_attention`: GQA with RoPE and a per-head RMSNorm of
q and k) or by a short convolution (`conv`, Lfm2ShortConv: in_proj hidden -> B, C, x; a depthwise
causal conv1d of `conv_L_cache` taps over B * x; C times its output; out_proj), then a SwiGLU
MLP (w1, w3, w2) on every layer. The conv layers are priced as the recurrent mixers' kernels
with rule ``short_conv`` (service.core.mixers.DeltaNetShape): in_proj and out_proj GEMMs and
causal_conv1d, whose state, the conv's last `conv_L_cache - 1` inputs per channel, takes the
place of a KV cache on those layers."""

from __future__ import annotations

from service.catalog.hf_config.dense import QK_NORM_NOTE
from service.catalog.hf_config.reading import ClassDefaults, ConfigKeys, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import InvalidArchitecture
from service.core.mixers import DeltaNetShape

# Lfm2Config.__init__ defaults (LFM2-1.2B-like): vocab 65536, hidden 2560, intermediate 12288,
# 32 layers, 32 heads, 8 KV heads, 128000 positions, tied embeddings.
LFM2 = ClassDefaults(65536, 2560, 12288, 32, 32, 8, 128_000, True)
# The original LFM2 keys the class accepts: block_ff_dim for intermediate_size.
LFM2_KEYS = ConfigKeys(intermediate_size=("block_ff_dim", "intermediate_size"))
_LAYER_TYPES = ("conv", "full_attention")


def lfm2_ff_width(view: ConfigView, width: int) -> int:
    """Lfm2MLP's width: with `block_auto_adjust_ff_dim` (default true) int(2 x width / 3), then,
    where `block_ffn_dim_multiplier` is set (default 1.0), int(multiplier x that) rounded up to
    `block_multiple_of` (default 256); else `width` as given."""
    if not view.flag("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    multiplier = view.raw.get("block_ffn_dim_multiplier", 1.0)
    if multiplier is None:
        return width
    if isinstance(multiplier, bool) or not isinstance(multiplier, int | float) or multiplier <= 0:
        field = view.field("block_ffn_dim_multiplier")
        raise InvalidArchitecture(f"{field} must be a positive number or null", field=field)
    multiple = view.size("block_multiple_of", 256)
    width = int(multiplier * width)
    return multiple * ((width + multiple - 1) // multiple)


def _layer_types(view: ConfigView, layers: int) -> list[str]:
    """`layer_types`, else every index of `full_attn_idxs` attends (default: all layers)."""
    types = view.text_list("layer_types")
    if types is None:
        attending = view.int_list("full_attn_idxs")
        attending_set = set(range(layers) if attending is None else attending)
        types = ["full_attention" if i in attending_set else "conv" for i in range(layers)]
    if len(types) != layers or set(types) - set(_LAYER_TYPES):
        raise InvalidArchitecture(
            f"{view.field('layer_types')} must list conv or full_attention for each of the "
            f"{layers} layers",
            field=view.field("layer_types"),
        )
    return types


def read_lfm2(view: ConfigView) -> Reading:
    """Lfm2Config (LFM2, LFM2.5 and the text decoder of LFM2-VL / LFM2.5-VL)."""
    reading = read_decoder(view, LFM2, LFM2_KEYS)
    if "tie_word_embeddings" not in view.raw and isinstance(view.raw.get("tie_embedding"), bool):
        reading.set("tie_word_embeddings", view.raw["tie_embedding"])  # the original key
    reading.set(
        "intermediate_size",
        lfm2_ff_width(view, reading.values["intermediate_size"]),
        "block_ff_dim" if "block_ff_dim" in view.raw else "intermediate_size",
    )
    hidden: int = reading.values["hidden_size"]
    types = _layer_types(view, reading.values["num_layers"])
    reading.set("num_delta_net_layers", types.count("conv"), "layer_types")
    shape = DeltaNetShape(
        num_key_heads=hidden,
        num_value_heads=hidden,
        key_head_dim=1,
        value_head_dim=1,
        conv_kernel=view.size("conv_L_cache", 3),
        rule="short_conv",
    )
    reading.set("delta_net", shape, "conv_L_cache")
    if view.flag("conv_bias", False):
        reading.notes.append("the short convolutions' biases left out (one add per channel)")
    reading.notes.append(QK_NORM_NOTE)
    return reading
