"""Readers of mixture-of-experts decoders: which layers route, to how many experts of what
width, with or without a shared expert, as each transformers config class and its modeling
code decide."""

from __future__ import annotations

from service.catalog.hf_config.dense import QK_NORM_NOTE, qwen_window
from service.catalog.hf_config.layers import (
    every_nth,
    note_mtp_layers,
    set_experts,
    set_window,
    sparse_step_layers,
    windowed_layers,
)
from service.catalog.hf_config.reading import ClassDefaults, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import UnsupportedArchitecture

MIXTRAL = ClassDefaults(32000, 4096, 14336, 32, 32, 8, 4096 * 32, False)
PHIMOE = ClassDefaults(32064, 4096, 6400, 32, 32, 8, 4096 * 32, False)
QWEN2_MOE = ClassDefaults(151936, 2048, 5632, 24, 16, 16, 32768, False)
QWEN3_MOE = ClassDefaults(151936, 2048, 6144, 24, 32, 4, 32768, False)
QWEN3_VL_MOE_TEXT = ClassDefaults(151936, 2048, 5632, 24, 16, 16, 128000, True)
GRANITE_MOE = ClassDefaults(32000, 4096, 11008, 32, 32, None, 2048, False)
OLMOE = ClassDefaults(50304, 2048, 2048, 16, 16, None, 4096, False)
GPT_OSS = ClassDefaults(
    201088, 2880, 2880, 36, 64, 8, 131072, False, head_dim=64, attention_bias=True
)
GLM4_MOE = ClassDefaults(151552, 4096, 10944, 46, 96, 8, 131072, False)
MINIMAX_M2 = ClassDefaults(200064, 3072, 1536, 62, 48, 8, 196608, False, head_dim=128)
LLAMA4_TEXT = ClassDefaults(202048, 5120, 8192, 48, 40, 8, 4096 * 32, False, head_dim=128)


def _every_layer_experts(reading: Reading, experts: int, top_k: int, key: str) -> Reading:
    """Experts on every layer, each as wide as `intermediate_size` (Mixtral's layout)."""
    view = reading.view
    set_experts(
        reading,
        experts=view.count(key, experts),
        experts_key=key,
        top_k=view.size("num_experts_per_tok", top_k),
        expert_width=reading.values["intermediate_size"],
        moe_layers=reading.values["num_layers"],
    )
    return reading


def _mixtral_like(view: ConfigView, defaults: ClassDefaults, experts: int, top_k: int) -> Reading:
    reading = _every_layer_experts(
        read_decoder(view, defaults), experts, top_k, "num_local_experts"
    )
    window = view.optional_size("sliding_window", None)
    set_window(reading, window, windowed_layers(reading, lambda i: True), "sliding_window")
    return reading


def read_mixtral(view: ConfigView) -> Reading:
    """MixtralConfig: 8 experts, top-2, on every layer; a window where `sliding_window` is set."""
    return _mixtral_like(view, MIXTRAL, 8, 2)


def read_phimoe(view: ConfigView) -> Reading:
    """PhimoeConfig (Phi-3.5-MoE): Mixtral's layout with LayerNorm."""
    reading = _mixtral_like(view, PHIMOE, 16, 2)
    reading.set("norm", "layernorm")
    return reading


def read_minimax_m2(view: ConfigView) -> Reading:
    """MiniMaxM2Config: 256 experts (top-8) of width `intermediate_size` on every layer, all
    softmax attention (`attn_type_list` 1; a 0, MiniMax-01's lightning attention, is refused)."""
    kinds = view.int_list("attn_type_list")
    if kinds is not None and 0 in kinds:
        raise UnsupportedArchitecture(
            f"{view.field('attn_type_list')} has lightning (linear) attention layers, which the "
            "per-kernel cost model does not price yet",
            field=view.field("attn_type_list"),
        )
    reading = _mixtral_like(view, MINIMAX_M2, 256, 8)
    reading.notes.append(QK_NORM_NOTE)
    if view.flag("use_mtp", False):
        note_mtp_layers(reading, ("num_mtp_modules",))
    return reading


def read_granitemoe(view: ConfigView) -> Reading:
    """GraniteMoeConfig / GraniteMoeSharedConfig: 8 experts, top-2, on every layer, plus a
    shared expert of `shared_intermediate_size` where that is non-zero."""
    reading = _every_layer_experts(read_decoder(view, GRANITE_MOE), 8, 2, "num_local_experts")
    shared = view.count("shared_intermediate_size", 0)
    if shared and reading.values.get("num_experts"):
        reading.set("num_shared_experts", 1)
        reading.set("shared_expert_intermediate_size", shared, "shared_intermediate_size")
    return reading


def read_olmoe(view: ConfigView) -> Reading:
    """OlmoeConfig: 64 experts, top-8, on every layer; QK-norm."""
    reading = _every_layer_experts(read_decoder(view, OLMOE), 64, 8, "num_experts")
    reading.notes.append(QK_NORM_NOTE)
    return reading


def _qwen_moe(
    view: ConfigView,
    defaults: ClassDefaults,
    experts: int,
    top_k: int,
    expert_width: int,
    shared_width: int | None,
) -> Reading:
    reading = read_decoder(view, defaults)
    step = view.size("decoder_sparse_step", 1)
    set_experts(
        reading,
        experts=view.count(("num_experts", "num_local_experts"), experts),
        experts_key="num_experts",
        top_k=view.size("num_experts_per_tok", top_k),
        expert_width=view.size("moe_intermediate_size", expert_width),
        moe_layers=sparse_step_layers(reading, step, view.int_list("mlp_only_layers")),
        shared_width=shared_width,
    )
    qwen_window(reading)
    return reading


def read_qwen2_moe(view: ConfigView) -> Reading:
    """Qwen2MoeConfig (Qwen1.5-MoE, Qwen2-57B-A14B): q/k/v biases, a gated shared expert."""
    shared = view.size("shared_expert_intermediate_size", 5632)
    reading = _qwen_moe(view, QWEN2_MOE, 60, 4, 1408, shared)
    reading.set("qkv_bias", view.flag("qkv_bias", True))
    return reading


def read_qwen3_moe(view: ConfigView) -> Reading:
    """Qwen3MoeConfig: 128 experts, top-8, on every `decoder_sparse_step`-th layer not in
    `mlp_only_layers`; QK-norm."""
    reading = _qwen_moe(view, QWEN3_MOE, 128, 8, 768, None)
    reading.notes.append(QK_NORM_NOTE)
    return reading


def read_qwen3_vl_moe_text(view: ConfigView) -> Reading:
    """Qwen3VLMoeTextConfig (the text decoder of Qwen3-VL-30B-A3B, -235B-A22B): Qwen3-MoE's
    layers with its own defaults (60 experts, top-4, of width 1408)."""
    reading = _qwen_moe(view, QWEN3_VL_MOE_TEXT, 60, 4, 1408, None)
    reading.notes.append(QK_NORM_NOTE)
    return reading


def read_gpt_oss(view: ConfigView) -> Reading:
    """GptOssConfig: 128 experts (top-4) of width `intermediate_size` on every layer; a
    128-token window on every other layer (the first of each pair)."""
    reading = _every_layer_experts(read_decoder(view, GPT_OSS), 128, 4, "num_local_experts")
    window = view.optional_size("sliding_window", 128)
    set_window(reading, window, windowed_layers(reading, every_nth(2)), "sliding_window")
    reading.notes += [
        "attention sinks ignored",
        "SwiGLU with clamp and biases on expert MLPs approximated as a standard gated SiLU MLP",
    ]
    return reading


def read_glm4_moe(view: ConfigView) -> Reading:
    """Glm4MoeConfig (GLM-4.5, GLM-4.6): `n_routed_experts` (top-8) with `n_shared_experts`
    shared ones, all of width `moe_intermediate_size`, on layers from `first_k_dense_replace`;
    the multi-token-prediction layers (`num_nextn_predict_layers`) are not served by default."""
    reading = read_decoder(view, GLM4_MOE)
    width = view.size("moe_intermediate_size", 1408)
    dense = min(view.count("first_k_dense_replace", 1), reading.values["num_layers"])
    set_experts(
        reading,
        experts=view.count("n_routed_experts", 128),
        experts_key="n_routed_experts",
        top_k=view.size("num_experts_per_tok", 8),
        expert_width=width,
        moe_layers=reading.values["num_layers"] - dense,
        shared_width=view.count("n_shared_experts", 1) * width,
    )
    note_mtp_layers(reading, ("num_nextn_predict_layers",))
    return reading


def read_llama4_text(view: ConfigView) -> Reading:
    """Llama4TextConfig: experts (top-`num_experts_per_tok`) plus one shared expert, both of
    width `intermediate_size`, on the `moe_layers` (every `interleave_moe_layer_step`-th); dense
    layers of width `intermediate_size_mlp`; chunked attention (`attention_chunk_size`) on the
    RoPE layers (all but every `no_rope_layer_interval`-th), priced as a window."""
    reading = read_decoder(view, LLAMA4_TEXT)
    layers = reading.values["num_layers"]
    expert_width = reading.values["intermediate_size"]
    reading.set(
        "intermediate_size", view.size("intermediate_size_mlp", 16384), "intermediate_size_mlp"
    )
    step = view.size("interleave_moe_layer_step", 1)
    moe_layers = view.int_list("moe_layers")
    count = (
        len(set(moe_layers) & set(range(layers)))
        if moe_layers is not None
        else len(range(step - 1, layers, step))
    )
    set_experts(
        reading,
        experts=view.count("num_local_experts", 16),
        experts_key="num_local_experts",
        top_k=view.size("num_experts_per_tok", 1),
        expert_width=expert_width,
        moe_layers=count,
        shared_width=expert_width,
    )
    rope_layers = view.int_list("no_rope_layers")
    interval = view.size("no_rope_layer_interval", 4)

    def chunked(i: int) -> bool:
        if rope_layers:  # 1 marks a RoPE (chunked) layer, 0 a NoPE (global) one
            return i < len(rope_layers) and rope_layers[i] != 0
        return (i + 1) % interval != 0

    window = view.optional_size("attention_chunk_size", 8192)
    set_window(reading, window, windowed_layers(reading, chunked), "attention_chunk_size")
    reading.notes.append(
        "chunked local attention on the RoPE layers priced as a sliding window of the chunk size"
    )
    return reading
