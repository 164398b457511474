"""Readers of DeepSeek's multi-head latent attention decoders (DeepSeek-V2, V3, R1, V3.1, V3.2
with DSA sparse attention, and Kimi K2, which ships DeepSeek-V3's config class): MLA ranks,
shared and routed experts, dense first layers, DSA's indexer. MLA is priced exactly,
un-absorbed in prefill and absorbed in decode (service.core.mla, service.core.dsa)."""

from __future__ import annotations

from service.catalog.hf_config.layers import note_mtp_layers, set_experts
from service.catalog.hf_config.reading import ClassDefaults, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.architecture import DsaShape, MlaShape

DEEPSEEK_V2 = ClassDefaults(102400, 4096, 11008, 30, 32, 32, 2048, False)
DEEPSEEK_V3 = ClassDefaults(129280, 7168, 18432, 61, 128, 128, 4096, False)


def mla_shape(view: ConfigView) -> MlaShape:
    """The MLA ranks, DeepSeek-V3's by default; `q_lora_rank` null is a full-rank query
    projection (DeepSeek-V2-Lite, Kimi Linear), q_lora_rank 0."""
    return MlaShape(
        q_lora_rank=view.optional_size("q_lora_rank", 1536) or 0,
        kv_lora_rank=view.size("kv_lora_rank", 512),
        qk_nope_head_dim=view.size("qk_nope_head_dim", 128),
        qk_rope_head_dim=view.size("qk_rope_head_dim", 64),
        v_head_dim=view.size("v_head_dim", 128),
    )


def set_mla(reading: Reading, mla: MlaShape) -> None:
    """MLA attention; head_dim is the query/key head width, as the catalogue's MLA entries
    state it."""
    reading.set("mla", mla)
    reading.set("head_dim", mla.qk_nope_head_dim + mla.qk_rope_head_dim, "qk_nope_head_dim")


def _read_mla(
    view: ConfigView,
    defaults: ClassDefaults,
    *,
    moe_width: int,
    shared: int,
    routed: int,
    top_k: int,
    first_dense: int,
) -> Reading:
    """The class defaults of the expert keys differ between V2 and V3; the rules do not: layer
    i routes when i >= first_k_dense_replace and i % moe_layer_freq == 0."""
    reading = read_decoder(view, defaults)
    mla = mla_shape(view)
    set_mla(reading, mla)
    layers = reading.values["num_layers"]
    first = view.count("first_k_dense_replace", first_dense)
    freq = view.size("moe_layer_freq", 1)
    width = view.size("moe_intermediate_size", moe_width)
    experts = view.count("n_routed_experts", routed)
    set_experts(
        reading,
        experts=experts,
        experts_key="n_routed_experts",
        top_k=view.size("num_experts_per_tok", top_k or None) if experts else 0,
        expert_width=width,
        moe_layers=sum(1 for i in range(layers) if i >= first and i % freq == 0),
        shared_width=view.count("n_shared_experts", shared) * width,
    )
    note_mtp_layers(reading, ("num_nextn_predict_layers",))
    return reading


def read_deepseek_v2(view: ConfigView) -> Reading:
    """DeepseekV2Config: no experts unless `n_routed_experts` is given (the class default is
    None), moe_intermediate_size 1407, no dense first layers by default."""
    return _read_mla(view, DEEPSEEK_V2, moe_width=1407, shared=0, routed=0, top_k=0, first_dense=0)


def read_deepseek_v32(view: ConfigView) -> Reading:
    """DeepseekV32Config (DeepSeek-V3.2-Exp, V3.2): DeepSeek-V3's layers with DSA sparse
    attention; the indexer's shapes default as the published config.json states them
    (https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json: index_n_heads
    64, index_head_dim 128, index_topk 2048)."""
    reading = read_deepseek_v3(view)
    dsa = DsaShape(
        index_n_heads=view.size("index_n_heads", 64),
        index_head_dim=view.size("index_head_dim", 128),
        index_topk=view.size("index_topk", 2048),
    )
    reading.set("dsa", dsa, "index_topk")
    return reading


# GlmMoeDsaConfig (GLM-5) has DeepSeek-V3.2's layers under other class defaults: the keys that
# shape them are required rather than defaulted from DeepSeek's.
_GLM_MOE_DSA_KEYS = (
    "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size",
    "first_k_dense_replace", "index_n_heads", "index_head_dim", "index_topk",
)  # fmt: skip


def read_glm_moe_dsa(view: ConfigView) -> Reading:
    """GlmMoeDsaConfig (GLM-5, GLM-5.x): MLA with DSA sparse attention and DeepSeek-style
    routed and shared experts after dense first layers, read as DeepSeek-V3.2 once every key
    that shapes the layers is stated (as GLM-5's config.json states them:
    https://huggingface.co/zai-org/GLM-5/blob/main/config.json)."""
    for key in _GLM_MOE_DSA_KEYS:
        view.size(key, None)
    return read_deepseek_v32(view)


def read_deepseek_v3(view: ConfigView) -> Reading:
    """DeepseekV3Config: 256 routed experts (top-8) and 1 shared of width 2048 on every layer
    after the first 3."""
    return _read_mla(
        view, DEEPSEEK_V3, moe_width=2048, shared=1, routed=256, top_k=8, first_dense=3
    )
