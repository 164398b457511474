"""StableLM (`stablelm`), read as transformers' StableLmConfig reads it; the catalogue's
StableLM-3B-4E1T entry (litgpt's figures written as stablelm keys) counted by hand."""

from __future__ import annotations

from typing import Any

from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.memory import parameter_count

# The keys StableLmConfig reads, at StableLM-3B-4E1T's sizes (its class defaults).
STABLELM_3B: dict[str, Any] = {
    "model_type": "stablelm", "hidden_size": 2560, "intermediate_size": 6912,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "vocab_size": 50304, "max_position_embeddings": 4096, "partial_rotary_factor": 0.25,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def test_stablelm_3b_by_hand() -> None:
    """Untied tables 2 x 50,304 x 2,560 = 257,556,480; a layer 4 x 2,560^2 = 26,214,400
    attention and 3 x 2,560 x 6,912 = 53,084,160 SwiGLU weights, x 32 = 2,537,553,920:
    2,795,110,400 (the name's 3B rounds it)."""
    arch = read_config(STABLELM_3B).architecture
    assert (arch.norm, arch.mlp, arch.qkv_bias, arch.parallel_residual) == (
        "layernorm", "gated", False, False
    )  # fmt: skip
    assert (arch.head_dim, arch.num_key_value_heads) == (80, 32)
    assert parameter_count(arch) == 2_795_110_400
    catalogued = load_model_catalog().get("stabilityai/stablelm-3b-4e1t").require_architecture()
    assert catalogued == arch


def test_stablelm_2_biases_and_parallel_residual() -> None:
    """StableLM 2 12B's keys: q/k/v biases (use_qkv_bias) and attention beside the MLP
    (use_parallel_residual); the defaults have neither."""
    arch = read_config(STABLELM_3B | {"use_qkv_bias": True, "use_parallel_residual": True})
    assert arch.architecture.qkv_bias and arch.architecture.parallel_residual
    default = read_config({"model_type": "stablelm"}).architecture
    assert (default.hidden_size, default.num_layers, default.vocab_size) == (2560, 32, 50304)
    assert not default.qkv_bias and not default.parallel_residual
