"""InternLM2 (`internlm2`), read as InternLM's remote-code InternLM2Config and vLLM's
models/internlm2.py build it: the keys of internlm2-20b's config.json, counted by hand, read as
the catalogue's hand-made entry; the class defaults; a bad key refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.cost_model_errors import CostModelError
from service.core.memory import parameter_count

# The decoder keys of internlm/internlm2-20b's config.json (the catalogue entry's source).
INTERNLM2_20B: dict[str, Any] = {
    "model_type": "internlm2", "architectures": ["InternLM2ForCausalLM"], "bias": False,
    "hidden_act": "silu", "hidden_size": 6144, "intermediate_size": 16384,
    "max_position_embeddings": 32768, "num_attention_heads": 48, "num_hidden_layers": 48,
    "num_key_value_heads": 8, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 92544,
}  # fmt: skip


def test_internlm2_20b_by_hand() -> None:
    """48 layers of hidden 6144: wqkv 6144 x (48 + 2 x 8) x 128 = 50,331,648, wo 6144^2 =
    37,748,736, w1/w3/w2 3 x 6144 x 16384 = 301,989,888: 390,070,272 a layer,
    18,723,373,056 in all; tok_embeddings and output 2 x 92,544 x 6144 = 1,137,180,672:
    19,860,553,728, the entry's 19.86B."""
    read = read_config(INTERNLM2_20B)
    arch = read.architecture
    assert (arch.num_key_value_heads, arch.head_dim, arch.qkv_bias) == (8, 128, False)
    assert parameter_count(arch) == 19_860_553_728
    assert load_model_catalog().get("internlm/internlm2-20b").require_architecture() == arch
    assert read.published_precision.value == "bf16"


def test_the_class_defaults_bias_the_projections() -> None:
    """InternLM2Config's defaults: InternLM2-7B's widths, a 103,168-token vocabulary,
    multi-head attention, biased wqkv and wo."""
    read = read_config({"model_type": "internlm2"})
    arch = read.architecture
    assert (arch.hidden_size, arch.vocab_size, arch.num_key_value_heads) == (4096, 103168, 32)
    assert arch.qkv_bias and "the bias of wo ignored (negligible)" in read.notes
    assert "bias" in read.defaulted


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"bias": "no"}, "bias"),
        ({"num_key_value_heads": 7}, "num_key_value_heads"),
        ({"intermediate_size": 0}, "intermediate_size"),
    ],
)
def test_what_cannot_be_priced_names_the_key(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(CostModelError) as error:
        read_config({**INTERNLM2_20B, **changes})
    assert error.value.field == field
