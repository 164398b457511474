"""Readers of Google's Gemma decoders: GeGLU MLP, RMSNorm scaling by (1 + weight), tied
embeddings; Gemma 2 and 3 add norms after attention and MLP and local (windowed) layers."""

from __future__ import annotations

from service.catalog.hf_config.layers import every_nth, set_window, windowed_layers
from service.catalog.hf_config.reading import ClassDefaults, ConfigKeys, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView

# GemmaConfig reads `hidden_activation` (its `hidden_act` is the older name).
GEMMA_KEYS = ConfigKeys(hidden_act=("hidden_activation", "hidden_act"))
GELU_TANH = "gelu_pytorch_tanh"
GEMMA = ClassDefaults(256000, 3072, 24576, 28, 16, 16, 8192, True, GELU_TANH, head_dim=256)
GEMMA2 = ClassDefaults(256000, 2304, 9216, 26, 8, 4, 8192, True, GELU_TANH, head_dim=256)
GEMMA3_TEXT = ClassDefaults(262208, 2304, 9216, 26, 8, 4, 131072, True, GELU_TANH, head_dim=256)
SOFTCAP_NOTE = "logit soft-capping ignored"


def read_gemma(view: ConfigView) -> Reading:
    """GemmaConfig (Gemma 1, CodeGemma)."""
    reading = read_decoder(view, GEMMA, GEMMA_KEYS)
    reading.set("norm_unit_offset", True)
    return reading


def read_gemma2(view: ConfigView) -> Reading:
    """Gemma2Config: sandwich norms; a 4096-token window on every other layer (the first of
    each pair), as its default layer_types."""
    reading = read_decoder(view, GEMMA2, GEMMA_KEYS)
    reading.set("norm_unit_offset", True)
    reading.set("sandwich_norms", True)
    window = view.optional_size("sliding_window", 4096)
    set_window(reading, window, windowed_layers(reading, every_nth(2)), "sliding_window")
    reading.notes.append(SOFTCAP_NOTE)
    return reading


def read_gemma3_text(view: ConfigView) -> Reading:
    """Gemma3TextConfig: sandwich norms and QK-norm; 5 of every 6 layers windowed
    (`sliding_window_pattern`, default 6) to `sliding_window` (default 4096)."""
    reading = read_decoder(view, GEMMA3_TEXT, GEMMA_KEYS)
    reading.set("norm_unit_offset", True)
    reading.set("sandwich_norms", True)
    window = view.optional_size("sliding_window", 4096)
    pattern = view.size("sliding_window_pattern", 6)
    set_window(reading, window, windowed_layers(reading, every_nth(pattern)), "sliding_window")
    reading.notes.append("QK RMSNorm per head ignored (negligible cost)")
    return reading
