"""Qwen-1 (`qwen`, QWenConfig's remote code) and GPT-2 (`gpt2`), read as their loaders read
them; the catalogue's genz-built entries counted by hand."""

from __future__ import annotations

from typing import Any

from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.memory import parameter_count

# https://huggingface.co/Qwen/Qwen-14B/blob/main/config.json (the keys QWenConfig reads)
QWEN_14B: dict[str, Any] = {
    "model_type": "qwen", "hidden_size": 5120, "num_hidden_layers": 40,
    "num_attention_heads": 40, "intermediate_size": 27392, "kv_channels": 128,
    "vocab_size": 152064, "max_position_embeddings": 8192, "seq_length": 2048, "no_bias": True,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def test_qwen1_halves_the_fused_mlp_width() -> None:
    """modeling_qwen.py's QWenMLP: w1 and w2 each intermediate_size // 2 = 13,696 wide. Tables
    2 x 152,064 x 5,120 = 1,557,135,360; a layer 5,120 x 3 x 5,120 + 5,120^2 = 104,857,600
    attention and 3 x 5,120 x 13,696 = 210,370,560 MLP weights, x 40 = 12,609,126,400:
    14,166,261,760 (the name's 14B)."""
    arch = read_config(QWEN_14B).architecture
    assert (arch.intermediate_size, arch.head_dim, arch.qkv_bias) == (13696, 128, True)
    assert (arch.norm, arch.mlp, arch.max_context_tokens) == ("rmsnorm", "gated", 8192)
    assert parameter_count(arch) == 14_166_261_760
    catalogued = load_model_catalog().get("Qwen/Qwen-14B").require_architecture()
    assert (catalogued.intermediate_size, catalogued.num_layers) == (13696, 40)


def test_gpt2_by_hand() -> None:
    """GPT2Config's defaults (GPT-2 small): tied 50,257 x 768 table 38,597,376; a layer
    4 x 768^2 = 2,359,296 attention and 2 x 768 x 3,072 = 4,718,592 MLP weights, x 12 =
    84,934,656: 123,532,032 (the learned position table and the norms not counted)."""
    arch = read_config({"model_type": "gpt2"}).architecture
    assert (arch.position, arch.mlp, arch.norm, arch.qkv_bias) == (
        "learned", "plain", "layernorm", True
    )  # fmt: skip
    assert arch.tie_word_embeddings and arch.intermediate_size == 3072
    assert parameter_count(arch) == 123_532_032
    catalogued = load_model_catalog().get("openai-community/gpt2").require_architecture()
    assert parameter_count(catalogued) == 123_532_032


def test_gpt2_xl_from_llm_analysis_by_hand() -> None:
    """GPT-2 XL (llm-analysis's gpt2-xl.json: 48 layers, 25 heads, 1,600 wide, FFN 6,400):
    tied 50,257 x 1,600 table 80,411,200; a layer 4 x 1,600^2 = 10,240,000 attention and
    2 x 1,600 x 6,400 = 20,480,000 MLP weights, x 48 = 1,474,560,000: 1,554,971,200."""
    arch = load_model_catalog().get("openai-community/gpt2-xl").require_architecture()
    assert (arch.num_layers, arch.num_attention_heads, arch.head_dim) == (48, 25, 64)
    assert parameter_count(arch) == 1_554_971_200
