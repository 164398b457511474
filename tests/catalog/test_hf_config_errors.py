"""A config.json that cannot be priced is refused naming the key at fault (its dotted path in
the config) or its model_type, never read into a wrong architecture."""

from __future__ import annotations

from typing import Any

import pytest
from hf_config_support import catalogued_configs, uncatalogued_configs

from service.catalog.hf_config import read_config
from service.core.cost_model_errors import (
    CostModelError,
    InvalidArchitecture,
    UnsupportedArchitecture,
)

LLAMA = catalogued_configs()["meta-llama/Llama-3.1-8B-Instruct"]
GEMMA3 = catalogued_configs()["google/gemma-3-27b-it"]
KIMI = uncatalogued_configs()["moonshotai/Kimi-K2-Instruct"]
MINIMAX = uncatalogued_configs()["MiniMaxAI/MiniMax-M2"]
NEO = uncatalogued_configs()["EleutherAI/gpt-neo-2.7B"]


def _with(config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**config, **changes}


def _text(config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**config, "text_config": {**config["text_config"], **changes}}


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (_with(LLAMA, hidden_size="4096"), "hidden_size"),
        (_with(LLAMA, num_hidden_layers=0), "num_hidden_layers"),
        (_with(LLAMA, num_hidden_layers=10**9), "num_hidden_layers"),  # bounded before any loop
        (_with(LLAMA, vocab_size=10**12), "vocab_size"),
        (_with(LLAMA, num_key_value_heads=5), "num_key_value_heads"),
        (_with(LLAMA, tie_word_embeddings="no"), "tie_word_embeddings"),
        (_with(LLAMA, hidden_act="xielu"), "hidden_act"),
        (_with(LLAMA, num_attention_heads=30, hidden_size=4000), "num_attention_heads"),
        (_text(GEMMA3, num_hidden_layers=-1), "text_config.num_hidden_layers"),
        (_text(GEMMA3, layer_types=["sliding_attention"] * 5), "text_config.layer_types"),
        (_text(GEMMA3, model_type="siglip_vision_model"), "text_config.model_type"),
        (_with(GEMMA3, text_config=[1, 2]), "text_config"),
        (_with(KIMI, n_routed_experts=-3), "n_routed_experts"),
        (_with(KIMI, num_experts_per_tok=500), "num_experts_per_tok"),
        (_with(KIMI, q_lora_rank="1536"), "q_lora_rank"),
        (_with(NEO, attention_types=[[["global", "sliding"], 16]]), "attention_types"),
        (_with(NEO, attention_types=[[["global", "local"], 15]]), "attention_types"),
        (_with(MINIMAX, attn_type_list=[0, 0, 0, 0, 0, 0, 0, 1] * 8), "attn_type_list"),
    ],
)
def test_a_bad_key_is_named(config: dict[str, Any], field: str) -> None:
    with pytest.raises(CostModelError) as raised:
        read_config(config)
    assert raised.value.field == field, raised.value.message
    assert field in raised.value.message


@pytest.mark.parametrize(
    ("model_type", "reason"),
    [
        ("zamba2", "Mamba-2"),
        ("rwkv", "linear attention"),
        ("recurrent_gemma", "RG-LRU"),
    ],
)
def test_layers_the_cost_model_cannot_price_are_refused_by_model_type(
    model_type: str, reason: str
) -> None:
    with pytest.raises(UnsupportedArchitecture) as raised:
        read_config({"model_type": model_type, "hidden_size": 4096, "num_hidden_layers": 56})
    assert raised.value.field == "model_type"
    assert repr(model_type) in raised.value.message and reason in raised.value.message


def test_an_unknown_model_type_names_close_ones_and_the_supported_list() -> None:
    with pytest.raises(UnsupportedArchitecture) as raised:
        read_config(_with(LLAMA, model_type="lama"))
    assert raised.value.field == "model_type"
    assert "did you mean llama" in raised.value.message
    assert "qwen3_moe" in raised.value.message  # the list of what is read


def test_a_config_without_model_type_is_refused() -> None:
    config = {k: v for k, v in LLAMA.items() if k != "model_type"}
    with pytest.raises(UnsupportedArchitecture) as raised:
        read_config(config)
    assert raised.value.field == "model_type"


def test_unknown_keys_are_ignored() -> None:
    noisy = _with(LLAMA, some_future_key={"nested": [1, "x"]}, auto_map={"AutoConfig": "x.Y"})
    assert read_config(noisy) == read_config(LLAMA)


def test_a_wrong_typed_layer_list_is_refused() -> None:
    config = _with(uncatalogued_configs()["Qwen/Qwen1.5-MoE-A2.7B"], mlp_only_layers=[0, "1"])
    with pytest.raises(InvalidArchitecture) as raised:
        read_config(config)
    assert raised.value.field == "mlp_only_layers"
