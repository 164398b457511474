"""Gemma 4 and MiMo-V2-Flash: sliding-window layers with an attention shape of their own, read
as transformers' Gemma4TextAttention and vLLM's MiMoV2FlashDecoderLayer build them; the
catalogue entries reproduced, parameters worked out by hand against the published sizes, bad
configs refused naming the key, and a quote."""

from __future__ import annotations

from typing import Any

import pytest

from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.architecture import AttentionShape
from service.core.cost_model_errors import InvalidArchitecture, UnsupportedArchitecture
from service.core.memory import active_parameter_count, parameter_count
from tests.catalog.hf_config_support import priced_documents

GEMMA4_26B = "google/gemma-4-26B-A4B"
# https://huggingface.co/google/gemma-4-26B-A4B/blob/main/config.json as aiconfigurator-core
# 0.12.0 ships it verbatim (model_configs/google--gemma-4-26B-A4B_config.json): the top level
# and text_config (vision_config and token ids left out: the reader reads none of them);
# layer_types is the file's list, 5 sliding then 1 full, five times.
GEMMA4_26B_CONFIG: dict[str, Any] = {
    "architectures": ["Gemma4ForConditionalGeneration"],
    "model_type": "gemma4",
    "dtype": "bfloat16",
    "tie_word_embeddings": True,
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attention_k_eq_v": True,
        "bos_token_id": 2, "dtype": "bfloat16", "enable_moe_block": True, "eos_token_id": 1,
        "final_logit_softcapping": 30.0, "global_head_dim": 512, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2816,
        "hidden_size_per_layer_input": 0, "initializer_range": 0.02,
        "intermediate_size": 2112,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
        "max_position_embeddings": 262144, "model_type": "gemma4_text",
        "moe_intermediate_size": 704, "num_attention_heads": 16, "num_experts": 128,
        "num_global_key_value_heads": 2, "num_hidden_layers": 30, "num_key_value_heads": 8,
        "num_kv_shared_layers": 0, "pad_token_id": 0, "rms_norm_eps": 1e-06,
        "rope_parameters": {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                               "rope_type": "proportional"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
        },
        "sliding_window": 1024, "tie_word_embeddings": True, "top_k_experts": 8,
        "use_bidirectional_attention": "vision", "use_cache": True,
        "use_double_wide_mlp": False, "vocab_size": 262144,
        "vocab_size_per_layer_input": 262144,
    },
}  # fmt: skip

MIMO = "XiaomiMiMo/MiMo-V2-Flash"
# https://huggingface.co/XiaomiMiMo/MiMo-V2-Flash/blob/main/config.json as aiconfigurator-core
# 0.12.0 ships it verbatim (model_configs/XiaomiMiMo--MiMo-V2-Flash_config.json).
MIMO_CONFIG: dict[str, Any] = {
    "architectures": ["MiMoV2FlashForCausalLM"], "model_type": "mimo_v2_flash",
    "num_hidden_layers": 48, "hidden_size": 4096, "num_attention_heads": 64,
    "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128, "intermediate_size": 16384,
    "vocab_size": 152576, "max_position_embeddings": 262144, "rope_theta": 5000000,
    "swa_rope_theta": 10000, "partial_rotary_factor": 0.334, "sliding_window": 128,
    "sliding_window_size": 128, "attention_chunk_size": 128, "swa_num_attention_heads": 64,
    "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
    "hybrid_layer_pattern": [0] + [1, 1, 1, 1, 0, 1] * 7 + [1, 1, 1, 1, 0],
    "moe_layer_freq": [0] + [1] * 47, "moe_intermediate_size": 2048, "n_routed_experts": 256,
    "n_shared_experts": None, "num_experts_per_tok": 8, "norm_topk_prob": True,
    "scoring_func": "sigmoid", "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
    "routed_scaling_factor": None, "hidden_act": "silu", "layernorm_epsilon": 1e-05,
    "attention_dropout": 0.0, "attention_bias": False, "attention_value_scale": 0.707,
    "add_swa_attention_sink_bias": True, "add_full_attention_sink_bias": False,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
    "use_cache": True,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                            "quant_method": "fp8", "weight_block_size": [128, 128]},
}  # fmt: skip


@pytest.mark.parametrize(("repo", "config"), [(GEMMA4_26B, GEMMA4_26B_CONFIG), (MIMO, MIMO_CONFIG)])
def test_config_reads_as_the_catalogue_entry(repo: str, config: dict[str, Any]) -> None:
    read = read_config(config)
    record = load_model_catalog().get(repo)
    assert read.architecture == record.require_architecture()
    assert read.published_precision is record.published_precision


def test_gemma4_layer_shapes() -> None:
    arch = read_config(GEMMA4_26B_CONFIG).architecture
    # full layers: 2 KV heads of 512, keys as values; sliding: 8 of 256 over 1024 tokens
    assert (arch.num_key_value_heads, arch.head_dim, arch.values_from_keys) == (2, 512, True)
    assert arch.sliding_attention == AttentionShape(16, 8, 256, 256)
    assert (arch.num_sliding_window_layers, arch.sliding_window_tokens) == (25, 1024)
    assert (arch.num_experts, arch.experts_per_token, arch.num_moe_layers) == (128, 8, 30)
    assert arch.shared_expert_intermediate_size == 2112  # the dense MLP beside the experts


def test_gemma4_parameters_by_hand() -> None:
    """Tied 262144 x 2816 table 738,197,504; 25 sliding layers' attention (q, o 2816 x 4096;
    k, v 2816 x 2048) 34,603,008 each; 5 full layers' (q, o 2816 x 8192; k 2816 x 1024, no v)
    49,020,928 each; 30 dense MLPs 3 x 2816 x 2112; 30 x 128 experts 3 x 2816 x 704 and
    routers 2816 x 128: 25.23B, 3.82B active (8 experts), the model card's 25.2B / 3.8B."""
    expert = 3 * 2816 * 704
    total = (
        262144 * 2816 + 25 * 34_603_008 + 5 * 49_020_928 + 30 * 3 * 2816 * 2112
        + 30 * (128 * expert + 2816 * 128)
    )  # fmt: skip
    active = total - 30 * 120 * expert
    arch = read_config(GEMMA4_26B_CONFIG).architecture
    assert (parameter_count(arch), active_parameter_count(arch)) == (total, active)
    assert (total, active) == (25_232_441_344, 3_821_830_144)
    assert abs(total / 25.2e9 - 1) < 0.01 and abs(active / 3.8e9 - 1) < 0.01


def test_gemma4_31b_against_its_card() -> None:
    """Gemma 4 31B (dense, 60 layers: 50 sliding of 16 KV heads, 10 full of 4): 30.70B, the
    model card's 30.7B."""
    arch = load_model_catalog().get("nvidia/Gemma-4-31B-IT-NVFP4").require_architecture()
    attention = 50 * 5376 * (2 * 8192 + 2 * 4096) + 10 * 5376 * (2 * 16384 + 2048)
    total = attention + 60 * 3 * 5376 * 21504 + 262144 * 5376
    assert parameter_count(arch) == total
    assert abs(total / 30.7e9 - 1) < 0.005


def test_mimo_parameters_by_hand() -> None:
    """Untied 152576 x 4096 tables; 9 full layers (q 4096 x 12288, k 4096 x 768, v 4096 x
    512, o 8192 x 4096) and 39 sliding ones (k 4096 x 1536, v 4096 x 1024); 1 dense MLP of
    16384; 47 MoE layers of 256 experts of 2048 and a 4096 x 256 router: 308.78B, 15.45B
    active, the published 309B / 15B."""
    q_o = 4096 * 12288 + 8192 * 4096
    expert = 3 * 4096 * 2048
    total = (
        2 * 152576 * 4096 + 9 * (q_o + 4096 * (768 + 512)) + 39 * (q_o + 4096 * (1536 + 1024))
        + 3 * 4096 * 16384 + 47 * (256 * expert + 4096 * 256)
    )  # fmt: skip
    active = total - 47 * 248 * expert
    arch = read_config(MIMO_CONFIG).architecture
    assert (parameter_count(arch), active_parameter_count(arch)) == (total, active)
    assert abs(total / 309e9 - 1) < 0.005 and abs(active / 15e9 - 1) < 0.05
    assert arch.sliding_attention == AttentionShape(64, 8, 192, 128)
    assert (arch.num_key_value_heads, arch.head_dim, arch.value_head_dim) == (4, 192, 128)
    assert (arch.num_sliding_window_layers, arch.sliding_window_tokens) == (39, 128)


def test_mixed_stack_kv_cache_by_hand() -> None:
    """Gemma 4 31B, one sequence of 8192 tokens in bf16 on one H200: 10 full layers hold every
    token at 4 KV heads x 512 x (K + V) = 4096 elements, 50 sliding layers the last 1024 at
    16 x 256 x 2 = 8192: (10 x 8192 x 4096 + 50 x 1024 x 8192) x 2 B = 1,509,949,440 B."""
    (document,) = priced_documents(
        [
            {
                "model": "nvidia/Gemma-4-31B-IT-NVFP4",
                "workload": {"batch_size": 1, "prompt_tokens": 7192, "output_tokens": 1000},
                "hardware": {"gpu": "H200-SXM-141GB", "count": 1},
                "precision": {"kv_cache": "bf16"},
                "datacenter": {"region": "FR"},
            }
        ],
        verbose=True,
    )
    breakdown = document["breakdown"]
    assert breakdown["kv_cache_bytes_per_gpu"] == pytest.approx(1_509_949_440, rel=1e-9)


@pytest.mark.parametrize(
    ("change", "error", "field"),
    [
        ({"hidden_size_per_layer_input": 256}, UnsupportedArchitecture,
         "text_config.hidden_size_per_layer_input"),
        ({"num_kv_shared_layers": 15}, UnsupportedArchitecture,
         "text_config.num_kv_shared_layers"),
        ({"num_global_key_value_heads": 3}, InvalidArchitecture,
         "text_config.num_global_key_value_heads"),
    ],
)  # fmt: skip
def test_gemma4_unpriced_configs_are_refused_naming_the_key(
    change: dict[str, Any], error: type[Exception], field: str
) -> None:
    config = {**GEMMA4_26B_CONFIG, "text_config": {**GEMMA4_26B_CONFIG["text_config"], **change}}
    with pytest.raises(error) as raised:
        read_config(config)
    assert getattr(raised.value, "field", None) == field


def test_mimo_pattern_must_cover_every_layer() -> None:
    with pytest.raises(InvalidArchitecture) as raised:
        read_config({**MIMO_CONFIG, "hybrid_layer_pattern": [1, 0]})
    assert raised.value.field == "hybrid_layer_pattern"


def test_config_is_quoted_as_the_catalogue_model() -> None:
    common = {
        "workload": {"batch_size": 4, "prompt_tokens": 3000, "output_tokens": 300},
        "hardware": {"gpu": "H100-SXM5-80GB", "count": 1},
        "datacenter": {"region": "FR"},
    }
    documents = priced_documents(
        [{"model": GEMMA4_26B, **common}, {"architecture": GEMMA4_26B_CONFIG, **common}]
    )
    assert documents[0]["energy"] == documents[1]["energy"]
    assert documents[0]["energy"]["gpu_j"] > 0
