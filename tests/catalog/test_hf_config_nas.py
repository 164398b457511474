"""Llama-3.3-Nemotron-Super-49B (nemotron-nas): each layer's attention and FFN from
`block_configs`, read as vLLM's and SGLang's DeciLMForCausalLM build them; the catalogue entry
reproduced, the parameter count worked out by hand, bad blocks refused naming the key, a quote."""

from __future__ import annotations

from typing import Any

import pytest

from service.catalog.hf_config import read_config
from service.catalog.hf_config.nas import ffn_width
from service.catalog.models import load_model_catalog
from service.core.cost_model_errors import InvalidArchitecture, UnsupportedArchitecture
from service.core.memory import parameter_count
from tests.catalog.hf_config_support import priced_documents

SUPER_49B = "nvidia/Llama-3_3-Nemotron-Super-49B-v1"
# https://huggingface.co/nvidia/Llama-3_3-Nemotron-Super-49B-v1/blob/main/config.json, as
# aiconfigurator-core 0.12.0 ships it verbatim: its 80 block_configs in order, run-length coded
# as (KV-head group of the attention, 0 for no_op; ffn_mult; consecutive layers).
RUNS = [
    (8, 2.625, 1), (8, 5.25, 5), (0, 2.625, 2), (8, 5.25, 3), (0, 3.28125, 1), (8, 5.25, 30),
    (0, 1.3125, 1), (0, 2.625, 2), (0, 1.3125, 1), (0, 5.25, 1), (0, 1.3125, 1), (0, 2.625, 1),
    (0, 1.3125, 3), (8, 5.25, 1), (0, 1.3125, 1), (0, 1.0, 2), (0, 1.3125, 1), (0, 1.0, 3),
    (0, 1.3125, 2), (0, 0.5, 2), (0, 1.0, 2), (0, 0.5, 2), (0, 1.0, 1), (0, 0.5, 2), (8, 5.25, 9),
]  # fmt: skip


def _block(group: int, mult: float) -> dict[str, Any]:
    attention = {"n_heads_in_group": group or None, "no_op": not group,
                 "replace_with_linear": False, "sparsify": None, "num_sink_tokens": None,
                 "window_length": None}  # fmt: skip
    return {"attention": attention,
            "ffn": {"ffn_mult": mult, "no_op": False, "replace_with_linear": False}}  # fmt: skip


CONFIG: dict[str, Any] = {
    "architectures": ["DeciLMForCausalLM"],
    "model_type": "nemotron-nas",
    "block_configs": [_block(g, m) for g, m, n in RUNS for _ in range(n)],
    "hidden_act": "silu",
    "hidden_size": 8192,
    "intermediate_size": None,
    "max_position_embeddings": 131072,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}


def test_config_reads_as_the_catalogue_entry() -> None:
    read = read_config(CONFIG)
    record = load_model_catalog().get(SUPER_49B)
    assert read.architecture == record.require_architecture()
    assert read.published_precision is record.published_precision
    arch = read.architecture
    assert (arch.num_layers, arch.num_attention_layers, arch.num_mixer_free_layers) == (80, 49, 31)
    assert (arch.num_key_value_heads, arch.num_mlp_free_layers) == (64 // 8, 0)


def test_ffn_widths_as_declm_rounds_them() -> None:
    # int(2 x mult x 8192 / 3), up to a multiple of 256
    assert [ffn_width(m, 8192) for m in (5.25, 2.625, 1.0, 0.5)] == [28672, 14336, 5632, 2816]


def test_parameters_by_hand() -> None:
    """49 attention layers (q, o 8192 x 8192; k, v 8192 x 1024), 80 gated MLPs of their own
    widths, untied 128256 x 8192 tables: 49.866B, the model card's 49.9B; the mean width
    prices the MLPs to within one element per layer."""
    widths = {5.25: 28672, 2.625: 14336, 3.28125: 17920, 1.3125: 7168, 1.0: 5632, 0.5: 2816}
    attention = 49 * (2 * 8192 * 8192 + 2 * 8192 * 1024)
    mlp = sum(3 * 8192 * widths[m] * n for _, m, n in RUNS)
    total = attention + mlp + 2 * 128256 * 8192
    assert total == 49_866_080_256
    counted = parameter_count(read_config(CONFIG).architecture)
    assert abs(counted - total) <= 80 * 3 * 8192
    assert abs(total / 49.9e9 - 1) < 0.01


@pytest.mark.parametrize(
    ("change", "error", "field"),
    [
        ({"replace_with_linear": True}, UnsupportedArchitecture,
         "block_configs[0].attention.replace_with_linear"),
        ({"n_heads_in_group": 3}, InvalidArchitecture,
         "block_configs[0].attention.n_heads_in_group"),
        ({"n_heads_in_group": 4}, UnsupportedArchitecture, "block_configs"),
    ],
)  # fmt: skip
def test_unpriced_blocks_are_refused_naming_the_key(
    change: dict[str, Any], error: type[Exception], field: str
) -> None:
    blocks = [dict(b) for b in CONFIG["block_configs"]]
    blocks[0] = {**blocks[0], "attention": {**blocks[0]["attention"], **change}}
    with pytest.raises(error) as raised:
        read_config({**CONFIG, "block_configs": blocks})
    assert getattr(raised.value, "field", None) == field


def test_config_is_quoted_as_the_catalogue_model() -> None:
    common = {
        "workload": {"batch_size": 4, "prompt_tokens": 900, "output_tokens": 200},
        "hardware": {"gpu": "H200-SXM-141GB", "count": 1},
        "datacenter": {"region": "FR"},
    }
    documents = priced_documents(
        [{"model": SUPER_49B, **common}, {"architecture": CONFIG, **common}]
    )
    assert documents[0]["energy"] == documents[1]["energy"]
    assert documents[0]["energy"]["gpu_j"] > 0
