"""LFM2 (`lfm2`, and the text decoder of `lfm2_vl`), read as transformers' Lfm2Config and
Lfm2Model read it; the vendored LFM2.5-VL-1.6B config.json (offline/catalog/published_configs)
counted and its state worked by hand."""

from __future__ import annotations

import json
from typing import Any

import pytest

from offline.catalog.vendored_configs import config_path
from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.cost_model_errors import InvalidArchitecture, UnsupportedArchitecture
from service.core.memory import parameter_count
from service.core.mixers import DeltaNetShape
from tests.catalog.hf_config_support import priced_documents

REPO = "LiquidAI/LFM2.5-VL-1.6B"


def _vl() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(config_path(REPO).read_text(encoding="utf-8"))
    return document


def _text() -> dict[str, Any]:
    text: dict[str, Any] = dict(_vl()["text_config"])
    return text


def test_vl_text_decoder_by_hand() -> None:
    """16 layers, 10 conv and 6 attention (32 query, 8 KV heads of 2048 / 32 = 64); block_ff_dim
    12288 auto-adjusted: int(2 x 12288 / 3) = 8192, a multiple of 256. Tied tables
    65,536 x 2,048 = 134,217,728; MLPs 16 x 3 x 2,048 x 8,192 = 805,306,368; conv layers
    10 x (2,048 x 6,144 + 2,048 x 3 + 2,048 x 2,048) = 167,833,600; attention layers
    6 x (2,048 x (2,048 + 2 x 512) + 2,048 x 2,048) = 62,914,560: 1,170,272,256. LFM2-1.2B's
    card states 1,170,340,608, which adds the 68,352 norm weights (2,048 + 16 x 2 x 2,048 +
    6 x 2 x 64) the count leaves out."""
    read = read_config(_vl())
    arch = read.architecture
    assert read.model_type == "lfm2_vl"
    assert (arch.num_layers, arch.num_delta_net_layers, arch.num_attention_layers) == (16, 10, 6)
    assert (arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim) == (32, 8, 64)
    assert arch.intermediate_size == 8192 and arch.tie_word_embeddings
    assert arch.delta_net == DeltaNetShape(2048, 2048, 1, 1, 3, rule="short_conv")
    assert parameter_count(arch) == 1_170_272_256
    assert 1_170_272_256 + 2_048 + 16 * 2 * 2_048 + 6 * 2 * 64 == 1_170_340_608


def test_vl_entry_is_the_text_config_read_alone() -> None:
    catalogued = load_model_catalog().get(REPO).require_architecture()
    assert read_config(_text()).architecture == catalogued


def test_state_and_kv_cache_by_hand() -> None:
    """One sequence of 1024 tokens in bf16 on one H100: the 6 attention layers hold
    8 KV heads x 64 x (K + V) = 1,024 elements per token, 6 x 1,024 x 1,024 x 2 B =
    12,582,912 B; the 10 conv layers the last conv_L_cache - 1 = 2 inputs of 2,048 channels,
    10 x 2 x 2,048 x 2 B = 81,920 B: 12,664,832 B."""
    (document,) = priced_documents(
        [
            {
                "model": REPO,
                "workload": {"batch_size": 1, "prompt_tokens": 1000, "output_tokens": 24},
                "hardware": {"gpu": "H100-SXM5-80GB", "count": 1},
                "precision": {"kv_cache": "bf16"},
                "datacenter": {"region": "FR"},
            }
        ],
        verbose=True,
    )
    breakdown = document["breakdown"]
    assert breakdown["kv_cache_bytes_per_gpu"] == pytest.approx(12_664_832, rel=1e-9)


def test_full_attn_idxs_and_original_keys() -> None:
    """Without layer_types, full_attn_idxs names the attention layers; without
    block_auto_adjust_ff_dim's 2/3 the width is block_ff_dim as given; tie_embedding is the
    original name of tie_word_embeddings."""
    config = {k: v for k, v in _text().items() if k != "layer_types"}
    config |= {"full_attn_idxs": [2, 5, 8], "block_auto_adjust_ff_dim": False,
               "tie_embedding": False}  # fmt: skip
    arch = read_config(config).architecture
    assert (arch.num_delta_net_layers, arch.num_attention_layers) == (13, 3)
    assert arch.intermediate_size == 12288 and not arch.tie_word_embeddings


def test_multiplier_null_skips_the_rounding() -> None:
    """block_ffn_dim_multiplier null: int(2 x 1000 / 3) = 666, not rounded to 256."""
    config = _text() | {"block_ff_dim": 1000, "block_ffn_dim_multiplier": None}
    assert read_config(config).architecture.intermediate_size == 666


@pytest.mark.parametrize(
    ("change", "error", "field"),
    [
        ({"layer_types": ["conv"] * 15}, InvalidArchitecture, "layer_types"),
        ({"layer_types": ["conv"] * 15 + ["mamba"]}, InvalidArchitecture, "layer_types"),
        ({"model_type": "lfm2_moe"}, UnsupportedArchitecture, "model_type"),
    ],
)
def test_bad_configs_name_the_key(change: dict[str, Any], error: type, field: str) -> None:
    with pytest.raises(error) as raised:
        read_config(_text() | change)
    assert getattr(raised.value, "field", None) == field
