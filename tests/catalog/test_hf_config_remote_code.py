"""Model types whose config class is remote code: ChatGLM2/3 (`chatglm`), read as THUDM's
ChatGLMConfig and modeling_chatglm.py build it (the vendored ChatGLM3-6B config.json counted by
hand), and Baichuan (`baichuan`), as BaichuanConfig and vLLM's models/baichuan.py; the keys that
change the layers, and the configs refused with the key at fault
(tests/api/test_estimate_config_json.py: the 422 that names it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from offline.catalog.vendored_configs import config_path
from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.cost_model_errors import CostModelError
from service.core.memory import parameter_count
from tests.catalog.hf_config_support import priced_documents

CHATGLM3: dict[str, Any] = json.loads(config_path("THUDM/chatglm3-6b").read_text("utf-8"))


def test_chatglm3_6b_by_hand() -> None:
    """28 layers of hidden 4096: query_key_value 4096 x (32 + 2 x 2) x 128 = 18,874,368, dense
    4096^2 = 16,777,216, dense_h_to_4h 4096 x 2 x 13,696 and dense_4h_to_h 13,696 x 4096 =
    168,296,448: 203,948,032 a layer, 5,710,544,896 in all; embedding and output_layer
    2 x 65,024 x 4096 = 532,676,608; 6,243,221,504 weights."""
    arch = read_config(CHATGLM3).architecture
    assert (arch.num_layers, arch.num_attention_heads, arch.num_key_value_heads) == (28, 32, 2)
    assert (arch.head_dim, arch.intermediate_size, arch.vocab_size) == (128, 13696, 65024)
    assert (arch.mlp, arch.activation, arch.norm, arch.qkv_bias) == (
        "gated", "silu", "rmsnorm", True
    )  # fmt: skip
    assert (arch.max_context_tokens, arch.tie_word_embeddings) == (32768, False)
    assert parameter_count(arch) == 6_243_221_504
    assert load_model_catalog().get("THUDM/chatglm3-6b").require_architecture() == arch


def test_the_kv_cache_holds_two_query_groups() -> None:
    """One sequence of 1,024 tokens in bf16 on one H100: multi-query attention with 2 groups
    caches 28 layers x 2 heads x 128 x (K + V) x 2 B = 28,672 B a token, 29,360,128 B; without
    multi_query_attention all 32 heads are cached, 16 times as much."""
    arch = read_config({**CHATGLM3, "multi_query_attention": False}).architecture
    assert arch.num_key_value_heads == 32
    body = {
        "model": "THUDM/chatglm3-6b",
        "workload": {"batch_size": 1, "prompt_tokens": 1000, "output_tokens": 24},
        "hardware": {"gpu": "H100-SXM5-80GB", "count": 1},
        "precision": {"kv_cache": "bf16"},
        "datacenter": {"region": "FR"},
    }
    (document,) = priced_documents([body], verbose=True)
    cache = document["breakdown"]["kv_cache_bytes_per_gpu"]
    assert cache == pytest.approx(1024 * 28 * 2 * 128 * 2 * 2, rel=1e-9)


def test_the_class_defaults_and_layernorm() -> None:
    """ChatGLMConfig's defaults: ChatGLM2-6B's sizes, multi-head, no q/k/v bias, 2048 tokens;
    `rmsnorm: false` builds LayerNorm."""
    read = read_config({"model_type": "chatglm", "rmsnorm": False})
    arch = read.architecture
    assert (arch.hidden_size, arch.num_layers, arch.num_key_value_heads) == (4096, 28, 32)
    assert (arch.max_context_tokens, arch.qkv_bias, arch.norm) == (2048, False, "layernorm")
    assert {"num_layers", "ffn_hidden_size", "padded_vocab_size", "seq_length"} <= set(
        read.defaulted
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"multi_query_group_num": 3}, "multi_query_group_num"),
        ({"multi_query_group_num": 64}, "multi_query_group_num"),
        ({"ffn_hidden_size": "13696"}, "ffn_hidden_size"),
        ({"quantization_bit": 4}, "quantization_bit"),
        ({"position_encoding_2d": True, "inner_hidden_size": 16384}, "position_encoding_2d"),
    ],
)
def test_what_cannot_be_priced_names_the_key(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(CostModelError) as error:
        read_config({**CHATGLM3, **changes})
    assert error.value.field == field


# Baichuan2-7B's and Baichuan2-13B's sizes under the keys each checkpoint's class reads.
BAICHUAN2_7B: dict[str, Any] = {
    "model_type": "baichuan", "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 125696,
    "max_position_embeddings": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip
BAICHUAN2_13B: dict[str, Any] = {
    "model_type": "baichuan", "hidden_size": 5120, "intermediate_size": 13696,
    "num_hidden_layers": 40, "num_attention_heads": 40, "vocab_size": 125696,
    "model_max_length": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def test_baichuan2_7b_by_hand_with_rope() -> None:
    """Hidden 4096 runs RoPE. A layer: W_pack 3 x 4096^2 and o_proj 4096^2 = 67,108,864,
    MLP 3 x 4096 x 11,008 = 135,266,304: 202,375,168, x 32 = 6,476,005,376; embed_tokens and
    lm_head 2 x 125,696 x 4096 = 1,029,701,632: 7,505,707,008."""
    arch = read_config(BAICHUAN2_7B).architecture
    assert (arch.position, arch.num_key_value_heads, arch.qkv_bias) == ("rope", 32, False)
    assert parameter_count(arch) == 7_505_707_008


def test_baichuan2_13b_by_hand_with_alibi() -> None:
    """Any other hidden size runs ALiBi, the context from model_max_length. A layer:
    4 x 5120^2 = 104,857,600 attention and 3 x 5120 x 13,696 = 210,370,560 MLP weights,
    x 40 = 12,609,126,400; tables 2 x 125,696 x 5120 = 1,287,127,040: 13,896,253,440."""
    arch = read_config(BAICHUAN2_13B).architecture
    assert (arch.position, arch.max_context_tokens, arch.norm) == ("alibi", 4096, "rmsnorm")
    assert parameter_count(arch) == 13_896_253_440
    defaults = read_config({"model_type": "baichuan"})
    assert (defaults.architecture.vocab_size, defaults.architecture.position) == (64000, "alibi")
    assert not {"max_position_embeddings", "model_max_length"} & set(
        read_config(BAICHUAN2_13B).defaulted
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model_max_length": "4k"}, "model_max_length"),
        ({"num_attention_heads": 7}, "num_attention_heads"),
    ],
)
def test_a_bad_baichuan_config_names_the_key(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(CostModelError) as error:
        read_config({**BAICHUAN2_13B, **changes})
    assert error.value.field == field
