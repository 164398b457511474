"""Which layers attend through a window and which route to experts, as the transformers config
classes derive them (`layer_types`, window patterns, `mlp_only_layers`, `first_k_dense_replace`)."""

from __future__ import annotations

from collections.abc import Callable

from service.catalog.hf_config.reading import Reading
from service.core.cost_model_errors import InvalidArchitecture

# layer_types entries of a windowed layer (Llama 4's chunked attention is priced as a window of
# the chunk size: a query attends to at most that many keys either way).
WINDOWED = ("sliding_attention", "chunked_attention")
FULL = ("full_attention", "attention")


def windowed_layers(reading: Reading, default: Callable[[int], bool]) -> int:
    """How many layers are windowed: from `layer_types` where the config lists them, else
    `default(i)` of each layer index (the class's own rule when it builds `layer_types`)."""
    num_layers: int = reading.values["num_layers"]
    types = reading.view.text_list("layer_types")
    if types is None:
        return sum(1 for i in range(num_layers) if default(i))
    field = reading.view.field("layer_types")
    if len(types) != num_layers:
        raise InvalidArchitecture(
            f"{field} lists {len(types)} layers, num_hidden_layers is {num_layers}", field=field
        )
    unknown = sorted(set(types) - set(WINDOWED) - set(FULL))
    if unknown:
        raise InvalidArchitecture(
            f"{field} holds layer types this service cannot price: {', '.join(unknown)}",
            field=field,
        )
    return sum(1 for t in types if t in WINDOWED)


def set_window(reading: Reading, window: int | None, layers: int, key: str) -> None:
    """Window `layers` layers to `window` tokens; none when there is no window or it spans the
    whole context (attention over a window that wide is full attention)."""
    if window is None or layers == 0 or window >= reading.values["max_context_tokens"]:
        reading.set("sliding_window_tokens", None)
        reading.set("num_sliding_window_layers", 0)
        return
    reading.set("sliding_window_tokens", window, key)
    reading.set("num_sliding_window_layers", layers, "layer_types")


def every_nth(step: int) -> Callable[[int], bool]:
    """True for every layer but each `step`-th (1-based): the sliding-window pattern of
    Gemma 2/3, Cohere 2 and gpt-oss, whose `step`-th layers attend globally."""
    return lambda i: (i + 1) % step != 0


def set_experts(
    reading: Reading,
    *,
    experts: int,
    experts_key: str,
    top_k: int,
    expert_width: int,
    moe_layers: int,
    shared_width: int | None = None,
) -> None:
    """A mixture-of-experts MLP on `moe_layers` layers: `experts` routed experts of FFN width
    `expert_width`, `top_k` per token, and a shared expert of total width `shared_width`."""
    if experts == 0 or moe_layers == 0:
        return
    reading.set("num_experts", experts, experts_key)
    reading.set("experts_per_token", top_k, "num_experts_per_tok")
    reading.set("moe_intermediate_size", expert_width, "moe_intermediate_size")
    reading.set("num_moe_layers", moe_layers, "num_hidden_layers")
    if shared_width:
        reading.set("num_shared_experts", 1)
        reading.set("shared_expert_intermediate_size", shared_width)


def sparse_step_layers(reading: Reading, step: int, dense_only: list[int] | None) -> int:
    """MoE layers of the Qwen MoE classes: every `step`-th layer (1-based) not listed in
    `mlp_only_layers`."""
    skip = set(dense_only or ())
    num_layers: int = reading.values["num_layers"]
    return sum(1 for i in range(num_layers) if i not in skip and (i + 1) % step == 0)


def note_mtp_layers(reading: Reading, keys: tuple[str, ...]) -> None:
    """Multi-token-prediction layers (DeepSeek-V3's `num_nextn_predict_layers`, Qwen3-Next's
    `mtp_num_hidden_layers`, MiMo's, GLM-4.5's) are neither loaded nor run: serving engines
    skip them when they load the model (vLLM's load_weights: "skip spec decode layers for main
    model") and load them only as the draft of speculative decoding, which the API does not
    ask for; so they count in neither memory nor time."""
    layers = max(reading.view.count(key, 0) for key in keys)
    if layers:
        reading.notes.append(
            f"{layers} multi-token-prediction layer(s) not loaded or priced: engines load them "
            "only as a speculative-decoding draft"
        )
