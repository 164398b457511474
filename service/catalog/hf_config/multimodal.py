"""Readers of multimodal checkpoints: their text decoder (`text_config`, read by the reader of
its own `model_type`), the vision tower left out. Qwen2-VL and Qwen2.5-VL configs published
before transformers 4.52 keep the text keys at the top level, which their class reads then."""

from __future__ import annotations

from collections.abc import Callable

from service.catalog.hf_config.dense import read_qwen2
from service.catalog.hf_config.reading import ClassDefaults, Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import UnsupportedArchitecture

Reader = Callable[[ConfigView], Reading]
VISION_NOTE = "vision encoder not modelled; text decoder only"

# The model_type a class builds its text_config as when the config names none.
TEXT_MODEL_TYPES = {
    "exaone4_5": "exaone4_5_text",
    "gemma3": "gemma3_text",
    "gemma4": "gemma4_text",
    "kimi_k25": "kimi_k2",  # Kimi K2.5 and later: a Kimi K2 (DeepSeek-V3) text decoder
    "lfm2_vl": "lfm2",
    "llama4": "llama4_text",
    "mistral3": "mistral",
    "llava": "llama",
    "llava_next": "llama",
    "mllama": "mllama_text_model",
    "qwen3_vl": "qwen3_vl_text",
    "qwen3_vl_moe": "qwen3_vl_moe_text",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
}
QWEN2_VL_TEXT = ClassDefaults(152064, 8192, 29568, 80, 64, 8, 32768, False)


def text_view(view: ConfigView) -> ConfigView:
    """The text sub-config, or an empty one at `text_config.` (the class's default)."""
    return view.sub("text_config") or ConfigView({}, view.field("text_config."), view.defaulted)


def read_text_decoder(view: ConfigView, model_type: str, readers: dict[str, Reader]) -> Reading:
    """The text decoder of a `model_type` multimodal config, read by its own reader."""
    text = text_view(view)
    inner = text.text("model_type", TEXT_MODEL_TYPES[model_type])
    reader = readers.get(inner)
    if reader is None or inner in TEXT_MODEL_TYPES:
        raise UnsupportedArchitecture(
            f"{text.field('model_type')} {inner!r} is not a text decoder this service reads",
            field=text.field("model_type"),
        )
    reading = reader(text)
    if "tie_word_embeddings" not in text.raw and isinstance(
        view.raw.get("tie_word_embeddings"), bool
    ):
        # The checkpoint's own statement (its top level) over the text class's default.
        reading.set("tie_word_embeddings", view.raw["tie_word_embeddings"])
    reading.notes.append(VISION_NOTE)
    return reading


def read_qwen2_vl(view: ConfigView) -> Reading:
    """Qwen2VLConfig / Qwen2_5_VLConfig: a Qwen2 text decoder (its text-config defaults), from
    `text_config` or, in configs that have none, from the top level."""
    text = view.sub("text_config") or view
    reading = read_qwen2(text, QWEN2_VL_TEXT)
    reading.notes.append(VISION_NOTE)
    return reading


# MllamaTextConfig (transformers src/transformers/models/mllama/configuration_mllama.py):
# num_hidden_layers counts the cross-attention layers too; cross_attention_layers defaults to
# [3, 8, 13, 18, 23, 28, 33, 38].
MLLAMA_TEXT = ClassDefaults(128256, 4096, 14336, 40, 32, 8, 131072, False)
MLLAMA_CROSS_LAYERS = [3, 8, 13, 18, 23, 28, 33, 38]


def read_mllama_text(view: ConfigView) -> Reading:
    """MllamaTextConfig (Llama 3.2 Vision, Llama Guard 3 Vision): a Llama decoder whose
    `cross_attention_layers` attend to image tokens instead of the text. A text-only request
    runs only the others: SGLang's MllamaTextModel (python/sglang/srt/models/mllama.py) skips
    every cross-attention layer when no sequence of the batch has an image (encoder_lens all 0),
    as transformers' MllamaTextModel does without cross_attention_states; their weights stay
    loaded (ModelArchitecture.num_cross_attention_layers). SGLang's decode CUDA graphs, captured
    with those layers in, replay them with a zero-masked output: such decode steps are priced
    without those layers' weight reads (docs/catalog/building.md)."""
    reading = read_decoder(view, MLLAMA_TEXT)
    layers: int = reading.values["num_layers"]
    listed = view.int_list("cross_attention_layers")
    if listed is None:
        view.defaulted[view.field("cross_attention_layers")] = MLLAMA_CROSS_LAYERS
    cross = len({i for i in (MLLAMA_CROSS_LAYERS if listed is None else listed) if i < layers})
    reading.set("num_layers", layers - cross, "num_hidden_layers")
    reading.set("num_cross_attention_layers", cross, "cross_attention_layers")
    if cross:
        reading.notes.append(
            f"{cross} cross-attention layers loaded but not run: a text-only request has no image "
            "tokens, and the engines skip those layers"
        )
    return reading
