"""Readers of pre-Llama decoders and their heirs: plain (non-gated) MLPs, LayerNorm, biases,
parallel attention and MLP, ALiBi or learned positions, GPT-2 style key names."""

from __future__ import annotations

from service.catalog.hf_config.layers import set_window, windowed_layers
from service.catalog.hf_config.reading import ClassDefaults, ConfigKeys, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import InvalidArchitecture

GPT2_KEYS = ConfigKeys(
    hidden_size=("n_embd", "hidden_size"),
    num_hidden_layers=("n_layer", "num_hidden_layers"),
    num_attention_heads=("n_head", "num_attention_heads"),
    intermediate_size=("n_inner", "intermediate_size"),
    max_position_embeddings=("n_positions", "max_position_embeddings"),
    hidden_act=("activation_function",),
)
PARTIAL_ROPE_NOTE = "partial rotary embedding priced as full RoPE (elementwise, negligible)"

PHI = ClassDefaults(51200, 2048, 8192, 24, 32, None, 2048, False, "gelu_new")
STARCODER2 = ClassDefaults(49152, 3072, 12288, 30, 24, 2, 4096, True, "gelu_pytorch_tanh")
GPT_NEOX = ClassDefaults(50432, 6144, 24576, 44, 64, None, 2048, False, "gelu")
GPTJ = ClassDefaults(50400, 4096, None, 28, 16, None, 2048, False, "gelu_new")
GPT_BIGCODE = ClassDefaults(50257, 768, None, 12, 12, None, 1024, True, "gelu_pytorch_tanh")
FALCON = ClassDefaults(65024, 4544, None, 32, 71, None, 2048, True, "gelu")
BLOOM = ClassDefaults(250880, 64, None, 2, 8, None, 2048, True, "gelu")
GPT_NEO = ClassDefaults(50257, 2048, None, 24, 16, None, 2048, True, "gelu_new")
OPT = ClassDefaults(50272, 768, 3072, 12, 12, None, 2048, True, "relu")


def _plain(reading: Reading, *, bias: bool, parallel: bool = False) -> Reading:
    reading.set("mlp", "plain")
    reading.set("norm", "layernorm")
    reading.set("qkv_bias", bias)
    reading.set("parallel_residual", parallel)
    return reading


def read_phi(view: ConfigView) -> Reading:
    """PhiConfig (Phi-1.5, Phi-2): attention and MLP in parallel from one LayerNorm."""
    reading = _plain(read_decoder(view, PHI), bias=True, parallel=True)
    reading.notes.append(PARTIAL_ROPE_NOTE)
    return reading


def read_starcoder2(view: ConfigView) -> Reading:
    """Starcoder2Config: biases everywhere (`use_bias`), a window on every layer where set."""
    reading = _plain(read_decoder(view, STARCODER2), bias=view.flag("use_bias", True))
    window = view.optional_size("sliding_window", None)
    set_window(reading, window, windowed_layers(reading, lambda i: True), "sliding_window")
    return reading


def read_gpt_neox(view: ConfigView) -> Reading:
    """GPTNeoXConfig (Pythia, GPT-NeoX-20B): parallel residual unless
    `use_parallel_residual` is false."""
    parallel = view.flag("use_parallel_residual", True)
    bias = view.flag("attention_bias", True)
    reading = _plain(read_decoder(view, GPT_NEOX), bias=bias, parallel=parallel)
    reading.notes.append(PARTIAL_ROPE_NOTE)
    return reading


def read_gptj(view: ConfigView) -> Reading:
    """GPTJConfig: parallel attention and MLP, no q/k/v biases."""
    return _plain(read_decoder(view, GPTJ, GPT2_KEYS), bias=False, parallel=True)


GPT2 = ClassDefaults(50257, 768, None, 12, 12, None, 1024, True, "gelu_new")


def read_gpt2(view: ConfigView) -> Reading:
    """GPT2Config (GPT-2): biases everywhere, learned positions, a 4 x hidden GELU MLP unless
    `n_inner`, tied embeddings."""
    reading = _plain(read_decoder(view, GPT2, GPT2_KEYS), bias=True)
    reading.set("position", "learned")
    return reading


def read_gpt_bigcode(view: ConfigView) -> Reading:
    """GPTBigCodeConfig (StarCoder, SantaCoder): multi-query attention (one KV head) unless
    `multi_query` is false, learned positions."""
    reading = _plain(read_decoder(view, GPT_BIGCODE, GPT2_KEYS), bias=True)
    heads = reading.values["num_attention_heads"]
    reading.set("num_key_value_heads", 1 if view.flag("multi_query", True) else heads)
    reading.set("position", "learned")
    return reading


def read_falcon(view: ConfigView) -> Reading:
    """FalconConfig: KV heads from `num_kv_heads` in the new decoder architecture (40B, 180B),
    else one (multi-query, 7B) or one per head; parallel attention, ALiBi where set."""
    keys = ConfigKeys(
        num_hidden_layers=("num_hidden_layers", "n_layer"),
        num_attention_heads=("num_attention_heads", "n_head"),
        num_key_value_heads=("num_kv_heads", "n_head_kv"),
        intermediate_size=("ffn_hidden_size",),
    )
    reading = read_decoder(view, FALCON, keys)
    heads = reading.values["num_attention_heads"]
    if not view.flag("new_decoder_architecture", False):
        reading.set("num_key_value_heads", 1 if view.flag("multi_query", True) else heads)
    _plain(reading, bias=view.flag("bias", False), parallel=view.flag("parallel_attn", True))
    if view.flag("alibi", False):
        reading.set("position", "alibi")
    return reading


def read_bloom(view: ConfigView) -> Reading:
    """BloomConfig: ALiBi positions, so no position limit; its training length (`seq_length`,
    2048) stands in for the context."""
    keys = ConfigKeys(
        hidden_size=("hidden_size", "n_embed"),
        num_hidden_layers=("n_layer", "num_hidden_layers"),
        num_attention_heads=("n_head", "num_attention_heads"),
        max_position_embeddings=("seq_length",),
    )
    reading = _plain(read_decoder(view, BLOOM, keys), bias=True)
    reading.set("activation", "gelu")  # BloomMLP's GeLU is fixed, whatever the config says
    reading.set("position", "alibi")
    return reading


def read_opt(view: ConfigView) -> Reading:
    """OPTConfig: learned positions, ReLU MLP of width `ffn_dim`, biases (`enable_bias`)."""
    keys = ConfigKeys(intermediate_size=("ffn_dim",), hidden_act=("activation_function",))
    reading = _plain(read_decoder(view, OPT, keys), bias=view.flag("enable_bias", True))
    reading.set("position", "learned")
    return reading


def read_gpt_neo(view: ConfigView) -> Reading:
    """GPTNeoConfig: learned positions, no q/k/v biases, and `attention_types` (pairs of a
    pattern and its repeat count, expanded as the class does) windowing its `local` layers to
    `window_size` (256) tokens."""
    keys = ConfigKeys(
        num_hidden_layers=("num_layers",),
        num_attention_heads=("num_heads",),
        hidden_act=("activation_function",),
    )
    reading = _plain(read_decoder(view, GPT_NEO, keys), bias=False)
    reading.set("position", "learned")
    kinds = _expanded_attention_types(view)
    layers = reading.values["num_layers"]
    if kinds is None:  # the class default: global and local alternating
        kinds = ["global", "local"] * (layers // 2)
    if len(kinds) != layers:
        raise InvalidArchitecture(
            f"attention_types expands to {len(kinds)} layers, num_layers is {layers}",
            field=view.field("attention_types"),
        )
    window = view.optional_size("window_size", 256)
    set_window(reading, window, kinds.count("local"), "window_size")
    return reading


def _expanded_attention_types(view: ConfigView) -> list[str] | None:
    value = view.raw.get("attention_types")
    if value is None:
        return None
    kinds: list[str] = []
    try:
        for pattern, repeat in value:
            if not isinstance(repeat, int) or not all(k in ("global", "local") for k in pattern):
                raise ValueError
            kinds += list(pattern) * min(repeat, 1000)
    except (TypeError, ValueError):
        raise InvalidArchitecture(
            "attention_types must be pairs of a list of 'global'/'local' and a count",
            field=view.field("attention_types"),
        ) from None
    return kinds
