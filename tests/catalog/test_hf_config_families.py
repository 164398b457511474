"""Published config.json files of model types the catalogue has no entry of, read as their
transformers classes read them. Each expectation is worked out by hand from the config and the
class: its defaults for absent keys (FalconConfig: ffn 4 x hidden, multi-query; Cohere2:
`sliding_window_pattern` 4), its layer rules (GLM-4.5: dense before `first_k_dense_replace`;
Gemma 3: every 6th layer global) and its fixed choices (Qwen2 biases, GPT-BigCode positions)."""

from __future__ import annotations

from typing import Any

import pytest
from hf_config_support import catalogued_configs, uncatalogued_configs

from service.catalog.hf_config import read_config
from service.core.architecture import MlaShape, ModelArchitecture
from service.core.dtypes import DType

CONFIGS = uncatalogued_configs()
PLAIN = {"mlp": "plain", "norm": "layernorm", "activation": "gelu"}

EXPECTED: dict[str, tuple[dict[str, Any], DType]] = {
    # 4544 / 71 heads = 64; ffn 4 x 4544; multi_query -> 1 KV head; parallel_attn; no biases
    "tiiuae/falcon-7b": (
        dict(hidden_size=4544, num_layers=32, num_attention_heads=71, num_key_value_heads=1,
             head_dim=64, intermediate_size=18176, vocab_size=65024, max_context_tokens=2048,
             parallel_residual=True, tie_word_embeddings=True, **PLAIN),
        DType.BF16,
    ),
    "EleutherAI/gpt-neox-20b": (
        dict(hidden_size=6144, num_layers=44, num_attention_heads=64, num_key_value_heads=64,
             head_dim=96, intermediate_size=24576, vocab_size=50432, max_context_tokens=2048,
             qkv_bias=True, parallel_residual=True, **PLAIN),
        DType.FP16,
    ),
    "bigcode/starcoder": (
        dict(hidden_size=6144, num_layers=40, num_attention_heads=48, num_key_value_heads=1,
             head_dim=128, intermediate_size=24576, vocab_size=49152, max_context_tokens=8192,
             qkv_bias=True, position="learned", tie_word_embeddings=True, **PLAIN),
        DType.FP32,
    ),
    # a 131072-token window over a 131072-token context is full attention
    "microsoft/Phi-3.5-MoE-instruct": (
        dict(hidden_size=4096, num_layers=32, num_attention_heads=32, num_key_value_heads=8,
             head_dim=128, intermediate_size=6400, vocab_size=32064, max_context_tokens=131072,
             norm="layernorm", qkv_bias=True, num_experts=16, experts_per_token=2,
             moe_intermediate_size=6400, num_moe_layers=32),
        DType.BF16,
    ),
    "Qwen/Qwen1.5-MoE-A2.7B": (
        dict(hidden_size=2048, num_layers=24, num_attention_heads=16, num_key_value_heads=16,
             head_dim=128, intermediate_size=5632, vocab_size=151936, max_context_tokens=8192,
             qkv_bias=True, num_experts=60, experts_per_token=4, moe_intermediate_size=1408,
             num_moe_layers=24, num_shared_experts=1, shared_expert_intermediate_size=5632),
        DType.BF16,
    ),
    # layer 0 dense, 45 MoE; one shared expert as wide as a routed one
    "zai-org/GLM-4.5-Air": (
        dict(hidden_size=4096, num_layers=46, num_attention_heads=96, num_key_value_heads=8,
             head_dim=128, intermediate_size=10944, vocab_size=151552, max_context_tokens=131072,
             qkv_bias=True, num_experts=128, experts_per_token=8, moe_intermediate_size=1408,
             num_moe_layers=45, num_shared_experts=1, shared_expert_intermediate_size=1408),
        DType.BF16,
    ),
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": (
        dict(hidden_size=5120, num_layers=40, num_attention_heads=32, num_key_value_heads=8,
             head_dim=128, intermediate_size=32768, vocab_size=131072, max_context_tokens=131072),
        DType.BF16,
    ),
    "Qwen/Qwen2.5-VL-7B-Instruct": (
        dict(hidden_size=3584, num_layers=28, num_attention_heads=28, num_key_value_heads=4,
             head_dim=128, intermediate_size=18944, vocab_size=152064, max_context_tokens=128000,
             qkv_bias=True),
        DType.BF16,
    ),
    # DeepSeek-V3's class: head_dim 128 + 64; layer 0 dense, 60 MoE; block-scaled fp8
    "moonshotai/Kimi-K2-Instruct": (
        dict(hidden_size=7168, num_layers=61, num_attention_heads=64, num_key_value_heads=64,
             head_dim=192, intermediate_size=18432, vocab_size=163840, max_context_tokens=131072,
             num_experts=384, experts_per_token=8, moe_intermediate_size=2048, num_moe_layers=60,
             num_shared_experts=1, shared_expert_intermediate_size=2048, fp8_block_scaled=True,
             mla=MlaShape(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                          qk_rope_head_dim=64, v_head_dim=128)),
        DType.FP8,
    ),
    "HuggingFaceTB/SmolLM3-3B": (
        dict(hidden_size=2048, num_layers=36, num_attention_heads=16, num_key_value_heads=4,
             head_dim=128, intermediate_size=11008, vocab_size=128256, max_context_tokens=65536,
             tie_word_embeddings=True),
        DType.BF16,
    ),
    "allenai/OLMoE-1B-7B-0924": (
        dict(hidden_size=2048, num_layers=16, num_attention_heads=16, num_key_value_heads=16,
             head_dim=128, intermediate_size=1024, vocab_size=50304, max_context_tokens=4096,
             num_experts=64, experts_per_token=8, moe_intermediate_size=1024, num_moe_layers=16),
        DType.BF16,
    ),
    "ibm-granite/granite-3.1-3b-a800m-instruct": (
        dict(hidden_size=1536, num_layers=32, num_attention_heads=24, num_key_value_heads=8,
             head_dim=64, intermediate_size=512, vocab_size=49155, max_context_tokens=131072,
             tie_word_embeddings=True, num_experts=40, experts_per_token=8,
             moe_intermediate_size=512, num_moe_layers=32),
        DType.BF16,
    ),
    "ibm-granite/granite-3.3-8b-instruct": (
        dict(hidden_size=4096, num_layers=40, num_attention_heads=32, num_key_value_heads=8,
             head_dim=128, intermediate_size=12800, vocab_size=49159, max_context_tokens=131072,
             tie_word_embeddings=True),
        DType.BF16,
    ),
    "allenai/OLMo-2-1124-7B": (
        dict(hidden_size=4096, num_layers=32, num_attention_heads=32, num_key_value_heads=32,
             head_dim=128, intermediate_size=11008, vocab_size=100352, max_context_tokens=4096),
        DType.FP32,
    ),
    # windows on layers 0-2 of every 4: 24 of 32; attention and MLP in parallel
    "CohereForAI/c4ai-command-r7b-12-2024": (
        dict(hidden_size=4096, num_layers=32, num_attention_heads=32, num_key_value_heads=8,
             head_dim=128, intermediate_size=14336, vocab_size=256000, max_context_tokens=132096,
             norm="layernorm", parallel_residual=True, tie_word_embeddings=True,
             sliding_window_tokens=4096, num_sliding_window_layers=24),
        DType.BF16,
    ),
    # global layers 5, 11, 17, 23: 22 of 26 windowed
    "google/gemma-3-1b-it": (
        dict(hidden_size=1152, num_layers=26, num_attention_heads=4, num_key_value_heads=1,
             head_dim=256, intermediate_size=6912, vocab_size=262144, max_context_tokens=32768,
             activation="gelu", tie_word_embeddings=True, sliding_window_tokens=512,
             num_sliding_window_layers=22, sandwich_norms=True, norm_unit_offset=True),
        DType.BF16,
    ),
    "nvidia/Minitron-8B-Base": (
        dict(hidden_size=4096, num_layers=32, num_attention_heads=48, num_key_value_heads=8,
             head_dim=128, intermediate_size=16384, vocab_size=256000, max_context_tokens=4096,
             mlp="plain", norm="layernorm", activation="relu"),
        DType.BF16,
    ),
    # 256 experts of width 1536 on all 62 layers; block-scaled fp8 as published
    "MiniMaxAI/MiniMax-M2": (
        dict(hidden_size=3072, num_layers=62, num_attention_heads=48, num_key_value_heads=8,
             head_dim=128, intermediate_size=1536, vocab_size=200064, max_context_tokens=196608,
             num_experts=256, experts_per_token=8, moe_intermediate_size=1536, num_moe_layers=62,
             fp8_block_scaled=True),
        DType.FP8,
    ),
    # the text class ties embeddings by default; the checkpoint's top level says it does not
    "Qwen/Qwen3-VL-30B-A3B-Instruct": (
        dict(hidden_size=2048, num_layers=48, num_attention_heads=32, num_key_value_heads=4,
             head_dim=128, intermediate_size=6144, vocab_size=151936, max_context_tokens=262144,
             num_experts=128, experts_per_token=8, moe_intermediate_size=768, num_moe_layers=48),
        DType.BF16,
    ),
    "Qwen/Qwen3-VL-8B-Instruct": (
        dict(hidden_size=4096, num_layers=36, num_attention_heads=32, num_key_value_heads=8,
             head_dim=128, intermediate_size=12288, vocab_size=151936, max_context_tokens=262144),
        DType.BF16,
    ),
    # 2560 / 20 heads = 128; ffn 4 x 2560; every second layer local (window 256): 16 of 32
    "EleutherAI/gpt-neo-2.7B": (
        dict(hidden_size=2560, num_layers=32, num_attention_heads=20, num_key_value_heads=20,
             head_dim=128, intermediate_size=10240, vocab_size=50257, max_context_tokens=2048,
             position="learned", tie_word_embeddings=True, sliding_window_tokens=256,
             num_sliding_window_layers=16, **PLAIN),
        DType.FP32,
    ),
    "allenai/OLMo-7B-hf": (
        dict(hidden_size=4096, num_layers=32, num_attention_heads=32, num_key_value_heads=32,
             head_dim=128, intermediate_size=11008, vocab_size=50304, max_context_tokens=2048,
             norm="layernorm"),
        DType.FP32,
    ),
    "THUDM/glm-4-9b-chat-hf": (
        dict(hidden_size=4096, num_layers=40, num_attention_heads=32, num_key_value_heads=2,
             head_dim=128, intermediate_size=13696, vocab_size=151552, max_context_tokens=131072,
             qkv_bias=True),
        DType.BF16,
    ),
}  # fmt: skip


def test_every_fixture_has_an_expectation() -> None:
    assert set(EXPECTED) == set(CONFIGS)


@pytest.mark.parametrize("repo_id", sorted(EXPECTED))
def test_config_reads_as_worked_out(repo_id: str) -> None:
    fields, precision = EXPECTED[repo_id]
    read = read_config(CONFIGS[repo_id])
    assert read.architecture == ModelArchitecture(**fields)
    assert read.published_precision is precision


def test_multimodal_and_approximated_parts_are_noted() -> None:
    notes = read_config(CONFIGS["mistralai/Mistral-Small-3.1-24B-Instruct-2503"]).notes
    assert "vision encoder not modelled; text decoder only" in notes
    # GLM-4.5-Air's one MTP layer: skipped by the engines' loaders unless speculative decoding
    assert (
        "1 multi-token-prediction layer(s) not loaded or priced: engines load them only as a "
        "speculative-decoding draft" in read_config(CONFIGS["zai-org/GLM-4.5-Air"]).notes
    )
    minitron = read_config(CONFIGS["nvidia/Minitron-8B-Base"]).notes
    assert any("squared ReLU" in note for note in minitron)


def test_class_defaults_fill_absent_keys() -> None:
    """An empty Gemma3TextConfig is the class's default model: 26 layers, hidden 2304, window
    4096 on the 22 layers not 6th, context 131072, vocab 262208; a config without a dtype is
    fp32, as transformers loads it."""
    read = read_config({"model_type": "gemma3_text"})
    arch = read.architecture
    assert (arch.num_layers, arch.hidden_size, arch.intermediate_size) == (26, 2304, 9216)
    assert (arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim) == (8, 4, 256)
    assert (arch.sliding_window_tokens, arch.num_sliding_window_layers) == (4096, 22)
    assert (arch.max_context_tokens, arch.vocab_size) == (131072, 262208)
    assert read.published_precision is DType.FP32
    assert {
        "num_hidden_layers": 26,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    }.items() <= (read.defaulted.items())
    # MistralConfig's window is 4096 unless the config says null
    assert read_config({"model_type": "mistral"}).architecture.sliding_window_tokens == 4096
    assert read_config({"model_type": "mistral", "sliding_window": None}).architecture == (
        ModelArchitecture(4096, 32, 32, 8, 128, 14336, 32000, max_context_tokens=131072)
    )


def test_only_absent_keys_are_reported_defaulted() -> None:
    """Llama 3.1 8B's config states every key LlamaConfig reads but head_dim (4096 / 32)."""
    read = read_config(catalogued_configs()["meta-llama/Llama-3.1-8B-Instruct"])
    assert read.defaulted == {"head_dim": 128}
    gemma = read_config(catalogued_configs()["google/gemma-3-27b-it"])
    assert gemma.defaulted["text_config.vocab_size"] == 262208
    assert "text_config.hidden_size" not in gemma.defaulted
