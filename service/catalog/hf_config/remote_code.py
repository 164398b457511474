"""Readers of model types whose config class ships only as remote code in the checkpoint's repo
(no transformers class): ChatGLM2/3 (`chatglm`: ChatGLM2-6B, ChatGLM3-6B, CodeGeeX2-6B), read
as THUDM's configuration_chatglm.py defines the keys and modeling_chatglm.py and vLLM's
models/chatglm.py build the layers (a Llama-like decoder in Megatron's key names); Baichuan
(`baichuan`), as Baichuan's configuration_baichuan.py and vLLM's models/baichuan.py."""

from __future__ import annotations

from service.catalog.hf_config.classic import PARTIAL_ROPE_NOTE
from service.catalog.hf_config.reading import ClassDefaults, ConfigKeys, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import InvalidArchitecture, UnsupportedArchitecture

# ChatGLMConfig's defaults (ChatGLM2-6B's sizes, multi-head attention). Its output_layer is a
# Linear of its own beside the embedding (modeling_chatglm.py): untied unless the config ties it.
CHATGLM = ClassDefaults(65024, 4096, 13696, 28, 32, None, 2048, False)
CHATGLM_KEYS = ConfigKeys(
    num_hidden_layers=("num_layers",),
    num_key_value_heads=("multi_query_group_num",),
    intermediate_size=("ffn_hidden_size",),
    vocab_size=("padded_vocab_size",),
    max_position_embeddings=("seq_length",),
    attention_bias=("add_qkv_bias",),
)
# ChatGLM-6B (the first one) has GLM blocks under these keys: 2D positions, a GELU MLP of
# inner_hidden_size, a 130,528-token vocabulary; no public serving engine loads it.
_FIRST_GENERATION_KEYS = ("position_encoding_2d", "inner_hidden_size")


def read_chatglm(view: ConfigView) -> Reading:
    """ChatGLMConfig: query_key_value projects to num_attention_heads query heads and, with
    `multi_query_attention`, `multi_query_group_num` key/value heads (else one per query head),
    each `kv_channels` wide, biased where add_qkv_bias (or add_bias_linear); dense_h_to_4h is
    the SwiGLU's gate and up (2 x ffn_hidden_size), dense_4h_to_h its down; RMSNorm unless
    `rmsnorm` is false; RoPE on half of each head (rotary_dim kv_channels / 2)."""
    for key in _FIRST_GENERATION_KEYS:
        if key in view.raw:
            raise UnsupportedArchitecture(
                f"{view.field(key)}: a first-generation ChatGLM-6B config (GLM blocks with 2D "
                "positions); the reader takes ChatGLM2/3 configs (ffn_hidden_size, "
                "multi_query_group_num)",
                field=view.field(key),
            )
    bits = view.count("quantization_bit", 0)
    if bits:
        raise UnsupportedArchitecture(
            f"{view.field('quantization_bit')} {bits}: ChatGLM's own int{bits} weights "
            "(cpm_kernels) are not a quantization_config this service prices",
            field=view.field("quantization_bit"),
        )
    reading = read_decoder(view, CHATGLM, CHATGLM_KEYS)
    heads = reading.values["num_attention_heads"]
    kv_heads = heads
    if view.flag("multi_query_attention", False):
        kv_heads = view.size("multi_query_group_num", 1)
        if kv_heads > heads or heads % kv_heads:
            field = view.field("multi_query_group_num")
            raise InvalidArchitecture(
                f"{field} ({kv_heads}) must divide num_attention_heads ({heads})", field=field
            )
    reading.set("num_key_value_heads", kv_heads, "multi_query_group_num")
    reading.set("head_dim", view.size("kv_channels", 128), "kv_channels")
    linear_bias = view.flag("add_bias_linear", False)
    reading.set("qkv_bias", linear_bias or view.flag("add_qkv_bias", False), "add_qkv_bias")
    reading.set("norm", "rmsnorm" if view.flag("rmsnorm", True) else "layernorm")
    reading.notes.append(PARTIAL_ROPE_NOTE)
    if linear_bias:
        reading.notes.append("biases of the dense and MLP projections ignored (negligible)")
    return reading


# BaichuanConfig (configuration_baichuan.py of Baichuan-13B/Baichuan2-13B): 13B's sizes, the
# context under model_max_length (Baichuan2-7B's config.json names it max_position_embeddings).
BAICHUAN = ClassDefaults(64000, 5120, 13696, 40, 40, None, 4096, False)
BAICHUAN_KEYS = ConfigKeys(max_position_embeddings=("max_position_embeddings", "model_max_length"))


def read_baichuan(view: ConfigView) -> Reading:
    """BaichuanConfig: multi-head attention through one unbiased W_pack (q, k, v), SwiGLU MLP,
    RMSNorm; RoPE at hidden size 4096 (Baichuan-7B, Baichuan2-7B), ALiBi otherwise (13B), as
    vLLM's BaichuanForCausalLM chooses. Baichuan 2's NormHead normalises the LM head's rows
    once at load: the same GEMM."""
    reading = read_decoder(view, BAICHUAN, BAICHUAN_KEYS)
    if reading.values["hidden_size"] != 4096:
        reading.set("position", "alibi")
    return reading
