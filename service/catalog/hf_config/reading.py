"""What every reader shares: a config class's defaults, the decoder keys every family has, and
the architecture they add up to (validated, errors naming the config key at fault)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.catalog.hf_config.view import ConfigView
from service.core.architecture import ModelArchitecture, validate_architecture
from service.core.cost_model_errors import InvalidArchitecture

# hidden_act values of transformers' ACT2FN, by the activation the cost model counts.
_ACTIVATIONS = {
    "silu": "silu",
    "swish": "silu",
    "gelu": "gelu",
    "gelu_new": "gelu",
    "gelu_fast": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_python": "gelu",
    "gelu_accurate": "gelu",
    "quick_gelu": "gelu",
    "relu": "relu",
    "relu2": "relu",  # squared ReLU (Nemotron): one more multiply per element, priced as ReLU
}


@dataclass(frozen=True, slots=True)
class ClassDefaults:
    """A transformers config class's defaults for the decoder keys (its `__init__` signature).

    `intermediate_size` None: 4 x hidden_size; `num_key_value_heads` None: one per attention
    head; `head_dim` None: hidden_size / num_attention_heads."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int | None
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    hidden_act: str = "silu"
    head_dim: int | None = None
    attention_bias: bool = False


@dataclass(frozen=True, slots=True)
class ConfigKeys:
    """The names a family's config.json gives the decoder keys, each with its aliases
    (transformers' attribute_map), the first present winning."""

    hidden_size: tuple[str, ...] = ("hidden_size",)
    num_hidden_layers: tuple[str, ...] = ("num_hidden_layers",)
    num_attention_heads: tuple[str, ...] = ("num_attention_heads",)
    num_key_value_heads: tuple[str, ...] = ("num_key_value_heads",)
    intermediate_size: tuple[str, ...] = ("intermediate_size",)
    vocab_size: tuple[str, ...] = ("vocab_size",)
    max_position_embeddings: tuple[str, ...] = ("max_position_embeddings",)
    hidden_act: tuple[str, ...] = ("hidden_act",)
    attention_bias: tuple[str, ...] = ("attention_bias",)


LLAMA_KEYS = ConfigKeys()
# Bounds of the custom form's fields (schemas/estimate_request.py), the context's widened for
# Llama 4 Scout's 10,485,760 positions: the readers loop over layers, and no real model is near.
MAX_LAYERS = 1000
MAXIMA = {
    "hidden_size": 10_000_000,
    "intermediate_size": 10_000_000,
    "moe_intermediate_size": 10_000_000,
    "shared_expert_intermediate_size": 10_000_000,
    "vocab_size": 10_000_000,
    "num_attention_heads": 1024,
    "num_key_value_heads": 1024,
    "head_dim": 4096,
    "num_experts": 1024,
    "max_context_tokens": 100_000_000,
}


@dataclass(slots=True)
class Reading:
    """A config being read: the ModelArchitecture fields found so far, the config key behind
    each (for error messages), and notes on what the cost model approximates."""

    view: ConfigView
    values: dict[str, Any] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def set(self, name: str, value: Any, key: str | None = None) -> None:
        self.values[name] = value
        if key is not None:
            self.keys[name] = self.view.field(key)

    def architecture(self) -> ModelArchitecture:
        """The architecture read; InvalidArchitecture names the config key at fault."""
        arch = ModelArchitecture(**self.values)
        try:
            for name, maximum in MAXIMA.items():
                if (getattr(arch, name) or 0) > maximum:
                    raise InvalidArchitecture(f"must be at most {maximum}", field=name)
            validate_architecture(arch)
        except InvalidArchitecture as error:
            key = self.keys.get(error.field or "", self.view.field(error.field or "model_type"))
            raise InvalidArchitecture(f"{key}: {error.message}", field=key) from None
        return arch


def activation_of(view: ConfigView, keys: tuple[str, ...], default: str) -> str:
    """The cost model's activation for a config's hidden_act."""
    name = view.text(keys, default)
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise InvalidArchitecture(
            f"{view.field(keys[0])} {name!r} is not an activation this service prices "
            f"(known: {', '.join(sorted(_ACTIVATIONS))})",
            field=view.field(keys[0]),
        ) from None


def read_decoder(
    view: ConfigView, defaults: ClassDefaults, keys: ConfigKeys = LLAMA_KEYS
) -> Reading:
    """The keys every decoder has, defaulted as `defaults`' class does: sizes, heads, head_dim
    (the `head_dim` key where present, as the modeling code's getattr(config, "head_dim", ...)
    reads it), context length, tied embeddings, attention bias and activation."""
    reading = Reading(view)
    hidden = view.size(keys.hidden_size, defaults.hidden_size)
    heads = view.size(keys.num_attention_heads, defaults.num_attention_heads)
    kv_default = defaults.num_key_value_heads or heads
    head_dim_default = defaults.head_dim
    if head_dim_default is None and view.raw.get("head_dim") is None:
        if hidden % heads:
            field_name = view.field(keys.num_attention_heads[0])
            raise InvalidArchitecture(
                f"{field_name} ({heads}) must divide hidden_size ({hidden}) when head_dim is "
                "not given",
                field=field_name,
            )
        head_dim_default = hidden // heads
    reading.set("hidden_size", hidden, keys.hidden_size[0])
    reading.set("num_attention_heads", heads, keys.num_attention_heads[0])
    reading.set(
        "num_layers",
        view.size(keys.num_hidden_layers, defaults.num_hidden_layers, MAX_LAYERS),
        keys.num_hidden_layers[0],
    )
    reading.set(
        "num_key_value_heads",
        view.size(keys.num_key_value_heads, kv_default),
        keys.num_key_value_heads[0],
    )
    reading.set("head_dim", view.size("head_dim", head_dim_default), "head_dim")
    reading.set(
        "intermediate_size",
        view.size(keys.intermediate_size, defaults.intermediate_size or 4 * hidden),
        keys.intermediate_size[0],
    )
    reading.set("vocab_size", view.size(keys.vocab_size, defaults.vocab_size), "vocab_size")
    reading.set(
        "max_context_tokens",
        view.size(keys.max_position_embeddings, defaults.max_position_embeddings),
        keys.max_position_embeddings[0],
    )
    reading.set(
        "tie_word_embeddings", view.flag("tie_word_embeddings", defaults.tie_word_embeddings)
    )
    reading.set("qkv_bias", view.flag(keys.attention_bias, defaults.attention_bias))
    reading.set("activation", activation_of(view, keys.hidden_act, defaults.hidden_act))
    return reading
