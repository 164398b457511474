"""Readers of the 2024 mixture-of-experts decoders that predate MLA: DBRX (16 fine-grained experts
on every layer, its sizes under MosaicML's names and two sub-configs) and DeepSeek-MoE (routed and
shared experts after dense first layers, with full multi-head attention). Both map onto the
existing kernels: GQA attention, a gated SiLU MLP per expert, a shared expert run beside the
routed ones and dense layers before `first_k_dense_replace`."""

from __future__ import annotations

from service.catalog.hf_config.layers import set_experts
from service.catalog.hf_config.reading import (
    ClassDefaults,
    ConfigKeys,
    Reading,
    activation_of,
    read_decoder,
)
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import InvalidArchitecture

# DbrxConfig (transformers src/transformers/models/dbrx/configuration_dbrx.py): d_model 2048,
# n_heads 16, n_layers 24, max_seq_len 2048, vocab_size 32000; its attribute_map names
# hidden_size, num_attention_heads, num_hidden_layers and max_position_embeddings after them.
DBRX = ClassDefaults(32000, 2048, None, 24, 16, None, 2048, False)
DBRX_KEYS = ConfigKeys(
    hidden_size=("d_model", "hidden_size"),
    num_hidden_layers=("n_layers", "num_hidden_layers"),
    num_attention_heads=("n_heads", "num_attention_heads"),
    max_position_embeddings=("max_seq_len", "max_position_embeddings"),
)
# DeepseekConfig, the remote-code class of deepseek-ai/deepseek-moe-16b-base
# (configuration_deepseek.py in the Hugging Face repo; the same defaults as DeepseekV2Config
# for the keys they share): no experts unless n_routed_experts is given.
DEEPSEEK = ClassDefaults(102400, 4096, 11008, 30, 32, None, 2048, False)


def read_dbrx(view: ConfigView) -> Reading:
    """DbrxConfig as transformers' DbrxModel and vLLM's DbrxForCausalLM
    (vllm/model_executor/models/dbrx.py) build it: `ffn_config.moe_num_experts` experts (4),
    `ffn_config.moe_top_k` per token (1), each a gated MLP (w1, v1, w2) of width
    `ffn_config.ffn_hidden_size` (3584), on every layer; GQA with `attn_config.kv_n_heads` KV
    heads (1) through one fused Wqkv without bias; LayerNorm without bias; no tied embeddings
    (the class refuses them). `attn_config.clip_qkv` clamps q, k and v elementwise: negligible."""
    reading = read_decoder(view, DBRX, DBRX_KEYS)
    for key in ("intermediate_size", "num_key_value_heads", "hidden_act"):
        view.defaulted.pop(view.field(key), None)  # DBRX states these in its sub-configs
    attn = view.sub("attn_config") or ConfigView({}, view.field("attn_config."), view.defaulted)
    ffn = view.sub("ffn_config") or ConfigView({}, view.field("ffn_config."), view.defaulted)
    reading.set("num_key_value_heads", attn.size("kv_n_heads", 1), "attn_config.kv_n_heads")
    width = ffn.size("ffn_hidden_size", 3584)
    reading.set("intermediate_size", width, "ffn_config.ffn_hidden_size")
    act = ffn.sub("ffn_act_fn")
    if act is not None:
        reading.set("activation", activation_of(act, ("name",), "silu"))
    if reading.values["tie_word_embeddings"]:
        field = view.field("tie_word_embeddings")
        raise InvalidArchitecture(f"{field}: DBRX does not tie its embeddings", field=field)
    reading.set("norm", "layernorm")
    set_experts(
        reading,
        experts=ffn.count("moe_num_experts", 4),
        experts_key="ffn_config.moe_num_experts",
        top_k=ffn.size("moe_top_k", 1),
        expert_width=width,
        moe_layers=reading.values["num_layers"],
    )
    return reading


def read_deepseek(view: ConfigView) -> Reading:
    """DeepseekConfig (DeepSeek-MoE 16B), as vLLM's DeepseekForCausalLM
    (vllm/model_executor/models/deepseek.py) builds it: layer i is a DeepseekMoE when
    `n_routed_experts` is set, i >= `first_k_dense_replace` and i % `moe_layer_freq` == 0, else
    a dense gated MLP of `intermediate_size`; a MoE layer routes each token to
    `num_experts_per_tok` of the routed experts of width `moe_intermediate_size` and always
    runs one shared MLP of width `n_shared_experts` x `moe_intermediate_size`. Attention is
    plain GQA (q/k/v/o without bias, RoPE over the whole head), head_dim hidden/heads."""
    reading = read_decoder(view, DEEPSEEK)
    layers = reading.values["num_layers"]
    first = view.count("first_k_dense_replace", 0)
    freq = view.size("moe_layer_freq", 1)
    width = view.size("moe_intermediate_size", 1407)
    experts = view.count("n_routed_experts", 0)
    set_experts(
        reading,
        experts=experts,
        experts_key="n_routed_experts",
        top_k=view.size("num_experts_per_tok", None) if experts else 0,
        expert_width=width,
        moe_layers=sum(1 for i in range(layers) if i >= first and i % freq == 0),
        shared_width=view.count("n_shared_experts", 0) * width,
    )
    return reading
