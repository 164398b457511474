"""Readers of dense decoders of the Llama lineage: GQA attention, gated MLP, RMSNorm, RoPE, with
the family's own windows, biases and norms. Defaults are each transformers config class's."""

from __future__ import annotations

from collections.abc import Callable

from service.catalog.hf_config.layers import (
    every_nth,
    note_mtp_layers,
    set_window,
    windowed_layers,
)
from service.catalog.hf_config.reading import ClassDefaults, ConfigKeys, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView

QK_NORM_NOTE = "QK RMSNorm per head ignored (negligible cost)"

LLAMA = ClassDefaults(32000, 4096, 11008, 32, 32, None, 2048, False)
MISTRAL = ClassDefaults(32000, 4096, 14336, 32, 32, 8, 4096 * 32, False)
QWEN2 = ClassDefaults(151936, 4096, 22016, 32, 32, 32, 32768, False)
QWEN3 = ClassDefaults(151936, 4096, 22016, 32, 32, 32, 32768, False, head_dim=128)
QWEN3_VL_TEXT = ClassDefaults(151936, 4096, 22016, 32, 32, 32, 128000, False, head_dim=128)
GRANITE = ClassDefaults(32000, 4096, 11008, 32, 32, None, 2048, False)
OLMO = ClassDefaults(50304, 4096, 11008, 32, 32, None, 2048, False)
OLMO2 = ClassDefaults(50304, 4096, 11008, 32, 32, None, 2048, False)
GLM = ClassDefaults(
    151552, 4096, 13696, 40, 32, 2, 131072, False, head_dim=128, attention_bias=True
)
CHAMELEON = ClassDefaults(65536, 4096, 11008, 32, 32, 32, 4096, False)
SMOLLM3 = ClassDefaults(128256, 2048, 11008, 36, 16, 4, 32768, True)
PHI3 = ClassDefaults(32064, 3072, 8192, 32, 32, None, 4096, False)
COHERE = ClassDefaults(256000, 8192, 22528, 40, 64, None, 8192, True)
NEMOTRON = ClassDefaults(256000, 6144, 24576, 32, 48, None, 4096, False, hidden_act="relu2")
MINISTRAL3 = ClassDefaults(131072, 4096, 14336, 34, 32, 8, 262144, False, head_dim=128)
EXAONE4 = ClassDefaults(102400, 4096, 16384, 32, 32, 32, 2048, False)
# InternLM2Config (InternLM's remote code, configuration_internlm2.py): InternLM2-7B's sizes, with
# biases on wqkv and wo (`bias`, true unless the config says otherwise).
INTERNLM2 = ClassDefaults(103168, 4096, 11008, 32, 32, None, 2048, False, attention_bias=True)


def read_llama(view: ConfigView) -> Reading:
    """LlamaConfig (also Llama 2/3, Falcon 3, DeepSeek-R1 distills, Aquila, Yi, ...)."""
    return read_decoder(view, LLAMA)


def read_internlm2(view: ConfigView) -> Reading:
    """InternLM2Config (InternLM2, InternLM2.5): a Llama whose q, k and v are one fused wqkv,
    biased with wo where `bias` (vLLM's models/internlm2.py); the MLP has no biases."""
    reading = read_decoder(view, INTERNLM2, ConfigKeys(attention_bias=("bias",)))
    if reading.values["qkv_bias"]:
        reading.notes.append("the bias of wo ignored (negligible)")
    return reading


def read_mistral(view: ConfigView) -> Reading:
    """MistralConfig: every layer windowed to `sliding_window` (4096 unless the config says
    otherwise; `null` turns it off, as in Mistral 7B v0.2 onwards)."""
    reading = read_decoder(view, MISTRAL)
    window = view.optional_size("sliding_window", 4096)
    set_window(reading, window, windowed_layers(reading, lambda i: True), "sliding_window")
    return reading


def read_ministral3(view: ConfigView) -> Reading:
    """Ministral3Config (Ministral 3, Devstral 2, the text decoder of Mistral 3 checkpoints
    saved by transformers 5): Mistral's layers, with no window unless `sliding_window` sets one
    (the published configs set it to null)."""
    reading = read_decoder(view, MINISTRAL3)
    window = view.optional_size("sliding_window", None)
    set_window(reading, window, windowed_layers(reading, lambda i: True), "sliding_window")
    return reading


def qwen_window(reading: Reading) -> None:
    """Qwen2/Qwen3 windows: only with `use_sliding_window`, on layers from `max_window_layers`
    on (the classes' layer_types rule)."""
    view = reading.view
    if not view.flag("use_sliding_window", False):
        set_window(reading, None, 0, "sliding_window")
        return
    window = view.optional_size("sliding_window", 4096)
    first = view.count("max_window_layers", 28)
    set_window(reading, window, windowed_layers(reading, lambda i: i >= first), "sliding_window")


def read_qwen2(view: ConfigView, defaults: ClassDefaults = QWEN2) -> Reading:
    """Qwen2Config (Qwen1.5, Qwen2, Qwen2.5, QwQ): biases on q, k and v always."""
    reading = read_decoder(view, defaults)
    reading.set("qkv_bias", True)
    qwen_window(reading)
    return reading


def read_mimo(view: ConfigView) -> Reading:
    """MiMoConfig (Xiaomi MiMo-7B): Qwen2's layers (vLLM's MiMoForCausalLM is Qwen2's model)
    plus multi-token-prediction layers that are not served by default."""
    reading = read_qwen2(view)
    note_mtp_layers(reading, ("num_nextn_predict_layers",))
    return reading


def read_qwen3(view: ConfigView, defaults: ClassDefaults = QWEN3) -> Reading:
    """Qwen3Config: Qwen2 without q/k/v biases (unless attention_bias), with QK-norm."""
    reading = read_decoder(view, defaults)
    qwen_window(reading)
    reading.notes.append(QK_NORM_NOTE)
    return reading


def read_qwen3_vl_text(view: ConfigView) -> Reading:
    """Qwen3VLTextConfig (the text decoder of Qwen3-VL): Qwen3's layers, its own defaults."""
    return read_qwen3(view, QWEN3_VL_TEXT)


def read_granite(view: ConfigView) -> Reading:
    """GraniteConfig (IBM Granite 3.x dense): a Llama with scaling multipliers, which do not
    change the kernels."""
    return read_decoder(view, GRANITE)


def read_olmo(view: ConfigView) -> Reading:
    """OlmoConfig (OLMo 1): a Llama with LayerNorm (without parameters) instead of RMSNorm."""
    reading = read_decoder(view, OLMO)
    reading.set("norm", "layernorm")
    return reading


# StableLmConfig (transformers models/stablelm/configuration_stablelm.py): StableLM-3B-4E1T's
# sizes; q/k/v biases only with use_qkv_bias (StableLM 2), RoPE on partial_rotary_factor 0.25.
STABLELM = ClassDefaults(50304, 2560, 6912, 32, 32, 32, 4096, False)
STABLELM_KEYS = ConfigKeys(attention_bias=("use_qkv_bias",))


def read_stablelm(view: ConfigView) -> Reading:
    """StableLmConfig (StableLM-3B-4E1T, StableLM Zephyr, Stable Code 3B, StableLM 2): a Llama
    with LayerNorm, partial RoPE, attention and MLP in parallel where use_parallel_residual."""
    reading = read_decoder(view, STABLELM, STABLELM_KEYS)
    reading.set("norm", "layernorm")
    reading.set("parallel_residual", view.flag("use_parallel_residual", False))
    reading.notes.append("partial rotary embedding priced as full RoPE (elementwise, negligible)")
    if view.flag("qk_layernorm", False):
        reading.notes.append(QK_NORM_NOTE)
    return reading


# QWenConfig (Qwen-1's remote code, configuration_qwen.py): Qwen-7B's sizes.
QWEN1 = ClassDefaults(151936, 4096, 22016, 32, 32, None, 8192, False, head_dim=128)


def read_qwen(view: ConfigView) -> Reading:
    """QWenConfig (Qwen-1: Qwen-1.8B/7B/14B/72B), as modeling_qwen.py and vLLM's models/qwen.py
    build it: multi-head attention of `kv_channels` per head with a biased c_attn, RMSNorm and
    a SwiGLU MLP whose w1 and w2 are each intermediate_size / 2 wide (the config's
    intermediate_size is the two together)."""
    keys = ConfigKeys(max_position_embeddings=("max_position_embeddings", "seq_length"))
    reading = read_decoder(view, QWEN1, keys)
    reading.set("head_dim", view.size("kv_channels", 128), "kv_channels")
    reading.set("intermediate_size", reading.values["intermediate_size"] // 2, "intermediate_size")
    reading.set("qkv_bias", True)
    return reading


def read_olmo2(view: ConfigView) -> Reading:
    """Olmo2Config: norms after attention and MLP instead of before (still two per layer)."""
    return read_olmo2_like(view, OLMO2)


def read_olmo3(view: ConfigView) -> Reading:
    """Olmo3Config: OLMo 2 with a 4096-token window on 3 of every 4 layers."""
    reading = read_olmo2(view)
    window = view.optional_size("sliding_window", 4096)
    set_window(reading, window, windowed_layers(reading, every_nth(4)), "sliding_window")
    return reading


def read_exaone4(view: ConfigView) -> Reading:
    """Exaone4Config (EXAONE 4.0, and the text decoder of EXAONE 4.5): OLMo 2's norms after
    attention and MLP and QK-norm; local layers windowed to `sliding_window` (4096) as
    `layer_types` lists them, else by `sliding_window_pattern` ("LLLG": three local, one
    global; an integer n: every n-th global). The global layers' missing RoPE costs nothing."""
    reading = read_olmo2_like(view, EXAONE4)
    window = view.optional_size("sliding_window", 4096)
    local = windowed_layers(reading, _exaone_local_layers(view))
    set_window(reading, window, local, "sliding_window")
    return reading


def _exaone_local_layers(view: ConfigView) -> Callable[[int], bool]:
    """Whether layer i is local by `sliding_window_pattern`: a string of L (local) and G
    (global) repeated over the layers, or every n-th layer global for an integer n."""
    pattern = view.raw.get("sliding_window_pattern", 4)
    if isinstance(pattern, str) and pattern:
        return lambda i: pattern[i % len(pattern)] == "L"
    return every_nth(view.size("sliding_window_pattern", 4))


def read_olmo2_like(view: ConfigView, defaults: ClassDefaults) -> Reading:
    """A Llama with its two norms after attention and MLP, and QK-norm."""
    reading = read_decoder(view, defaults)
    reading.notes.append(QK_NORM_NOTE)
    return reading


def read_glm(view: ConfigView) -> Reading:
    """GlmConfig (GLM-4-9B): q/k/v biases, partial RoPE."""
    return read_decoder(view, GLM)


def read_glm4(view: ConfigView) -> Reading:
    """Glm4Config (GLM-4-0414): GLM with norms after attention and MLP as well (4 per layer)."""
    reading = read_decoder(view, GLM)
    reading.set("sandwich_norms", True)
    return reading


def read_chameleon(view: ConfigView) -> Reading:
    """ChameleonConfig: a Llama with QK-norm over image and text tokens alike."""
    reading = read_decoder(view, CHAMELEON)
    reading.notes.append(QK_NORM_NOTE)
    return reading


def read_smollm3(view: ConfigView) -> Reading:
    """SmolLM3Config: a Llama whose every 4th layer has no RoPE (same kernels)."""
    reading = read_decoder(view, SMOLLM3)
    qwen_window(reading)
    return reading


def read_phi3(view: ConfigView) -> Reading:
    """Phi3Config (Phi-3, Phi-3.5-mini, Phi-4): fused qkv and gate/up projections; a window on
    every layer where `sliding_window` is set."""
    reading = read_decoder(view, PHI3)
    window = view.optional_size("sliding_window", None)
    set_window(reading, window, windowed_layers(reading, lambda i: True), "sliding_window")
    return reading


def read_cohere(view: ConfigView) -> Reading:
    """CohereConfig (Command R): attention and MLP in parallel from one LayerNorm."""
    reading = read_decoder(view, COHERE)
    reading.set("norm", "layernorm")
    reading.set("parallel_residual", True)
    return reading


def read_cohere2(view: ConfigView) -> Reading:
    """Cohere2Config (Command R7B, Command A): Command R with a 4096-token window on 3 of every
    4 layers (`sliding_window_pattern`)."""
    reading = read_cohere(view)
    window = view.optional_size("sliding_window", 4096)
    pattern = view.size("sliding_window_pattern", 4)
    set_window(reading, window, windowed_layers(reading, every_nth(pattern)), "sliding_window")
    return reading


def read_nemotron(view: ConfigView) -> Reading:
    """NemotronConfig (Nemotron-4, Minitron): plain MLP with squared ReLU, LayerNorm."""
    reading = read_decoder(view, NEMOTRON)
    reading.set("mlp", "plain")
    reading.set("norm", "layernorm")
    reading.notes.append("squared ReLU priced as ReLU (one more multiply per element)")
    return reading
