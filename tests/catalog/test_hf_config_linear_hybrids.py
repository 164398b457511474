"""Kimi Linear, MiniMax-M1 and Mamba-1 (Falcon-Mamba) configs, read as their loaders read them;
parameter counts worked by hand from the published shapes."""

from __future__ import annotations

from typing import Any

import pytest

from service.catalog.hf_config import read_config
from service.core.cost_model_errors import InvalidArchitecture
from service.core.memory import parameter_count
from service.core.mixers import DeltaNetShape, MambaShape

# https://huggingface.co/moonshotai/Kimi-Linear-48B-A3B-Instruct/blob/main/config.json (the keys
# KimiLinearConfig reads)
KIMI_LINEAR_48B: dict[str, Any] = {
    "model_type": "kimi_linear", "vocab_size": 163840, "hidden_size": 2304, "head_dim": 72,
    "intermediate_size": 9216, "num_hidden_layers": 27, "num_attention_heads": 32,
    "num_key_value_heads": 32, "q_lora_rank": None, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": True, "model_max_length": 1048576,
    "linear_attn_config": {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128, "num_heads": 32,
        "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
        "short_conv_kernel_size": 4,
    },
    "num_experts": 256, "moe_intermediate_size": 1024, "num_experts_per_token": 8,
    "num_shared_experts": 1, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "tie_word_embeddings": False, "num_nextn_predict_layers": 0,
}  # fmt: skip
# https://huggingface.co/MiniMaxAI/MiniMax-M1-80k/blob/main/config.json
MINIMAX_M1: dict[str, Any] = {
    "model_type": "minimax_m1", "head_dim": 128, "hidden_act": "silu", "hidden_size": 6144,
    "intermediate_size": 9216, "max_position_embeddings": 10240000, "num_attention_heads": 64,
    "num_experts_per_tok": 2, "num_hidden_layers": 80, "num_key_value_heads": 8,
    "num_local_experts": 32, "rotary_dim": 64, "shared_intermediate_size": 0,
    "tie_word_embeddings": False, "vocab_size": 200064, "attn_type_list": [0] * 7 + [1],
}  # fmt: skip
MINIMAX_M1["attn_type_list"] = MINIMAX_M1["attn_type_list"] * 10
# https://huggingface.co/tiiuae/falcon-mamba-7b/blob/main/config.json
FALCON_MAMBA_7B: dict[str, Any] = {
    "model_type": "falcon_mamba", "conv_kernel": 4, "expand": 16, "hidden_size": 4096,
    "intermediate_size": 8192, "num_hidden_layers": 64, "state_size": 16,
    "tie_word_embeddings": False, "time_step_rank": 256, "vocab_size": 65024,
}  # fmt: skip


def test_kimi_linear_reads_kda_beside_full_rank_mla() -> None:
    """20 KDA layers (32 heads of 128, fp32 state), 7 MLA layers with a full-rank q_proj and no
    RoPE; experts on layers 1..26. Parameters by hand: tables 2 x 163,840 x 2,304 =
    754,974,720; a KDA layer 3 x 2,304 x 4,096 (q, k, v) + 2,304 x 32 (beta) + 2 x 2,304 x 128
    (f_a, g_a) + 2 x 128 x 4,096 (f_b, g_b) + 3 x 4,096 x 4 (conv) + 4,096 x 2,304 (o) =
    39,510,016, x 20; an MLA layer 2,304 x 32 x 192 + 2,304 x 576 + 512 x 32 x 256 +
    32 x 128 x 2,304 = 29,114,368, x 7; the dense MLP 3 x 2,304 x 9,216 = 63,700,992; a MoE
    layer 257 x 3 x 2,304 x 1,024 + 2,304 x 256 = 1,819,607,040, x 26: 49,122,459,648 (the
    model card's "48B total")."""
    arch = read_config(KIMI_LINEAR_48B).architecture
    assert arch.delta_net == DeltaNetShape(32, 32, 128, 128, 4, 64, True, "kda")
    assert (arch.num_delta_net_layers, arch.num_attention_layers) == (20, 7)
    assert arch.mla is not None and arch.mla.q_lora_rank == 0 and arch.head_dim == 192
    assert arch.position == "none"
    assert (arch.num_moe_layers, arch.num_dense_mlp_layers, arch.shared_expert_width) == (
        26, 1, 1024
    )  # fmt: skip
    assert arch.max_context_tokens == 1048576
    assert parameter_count(arch) == 49_122_459_648


def test_minimax_m1_reads_lightning_beside_softmax() -> None:
    """70 lightning layers (64 heads of 128, no conv), 10 GQA layers; 32 experts top-2 on all
    80. Parameters by hand: tables 2 x 200,064 x 6,144 = 2,458,386,432; a lightning layer
    6,144 x 4 x 8,192 + 8,192 x 6,144 = 251,658,240, x 70; an attention layer
    6,144 x (8,192 + 2 x 1,024) + 8,192 x 6,144 = 113,246,208, x 10; a MoE layer
    32 x 3 x 6,144 x 9,216 + 6,144 x 32 = 5,436,014,592, x 80: 456,088,092,672 (456B as
    published)."""
    arch = read_config(MINIMAX_M1).architecture
    assert arch.delta_net == DeltaNetShape(64, 64, 128, 128, 0, 256, True, "lightning")
    assert (arch.num_delta_net_layers, arch.num_attention_layers) == (70, 10)
    assert (arch.num_experts, arch.experts_per_token, arch.num_moe_layers) == (32, 2, 80)
    assert arch.shared_expert_width == 0
    assert parameter_count(arch) == 456_088_092_672


def test_minimax_layer_types_match_attn_type_list() -> None:
    """transformers' MiniMaxConfig (model_type minimax) names the same layers in layer_types."""
    types = [
        "linear_attention" if k == 0 else "full_attention" for k in MINIMAX_M1["attn_type_list"]
    ]
    converted = {k: v for k, v in MINIMAX_M1.items() if k != "attn_type_list"}
    converted |= {"model_type": "minimax", "layer_types": types}
    assert read_config(converted).architecture == read_config(MINIMAX_M1).architecture


def test_falcon_mamba_reads_mamba_1_alone() -> None:
    """64 Mamba-1 layers, d_inner 8,192, dt rank 256, state 16, no MLP, no attention.
    Parameters by hand: tables 2 x 65,024 x 4,096 = 532,676,608; a layer 4,096 x 16,384
    (in_proj) + 8,192 x 4 (conv) + 8,192 x (256 + 32) (x_proj) + 256 x 8,192 (dt_proj) +
    8,192 x 4,096 (out_proj) = 105,152,512, x 64: 7,262,437,376 (7.27B as published)."""
    arch = read_config(FALCON_MAMBA_7B).architecture
    assert arch.mamba == MambaShape(8192, 1, 16, 1, 4, dt_rank=256)
    assert (arch.num_mamba_layers, arch.num_attention_layers, arch.num_mlp_layers) == (64, 0, 0)
    assert parameter_count(arch) == 7_262_437_376


def test_mamba_time_step_rank_auto_is_a_sixteenth_of_hidden() -> None:
    """MambaConfig's defaults (state-spaces/mamba-130m-hf): hidden 768, 24 layers here, dt rank
    "auto" = ceil(768 / 16) = 48, d_inner = expand 2 x 768."""
    arch = read_config({"model_type": "mamba", "num_hidden_layers": 24}).architecture
    assert arch.mamba is not None and (arch.mamba.dt_rank, arch.mamba.num_heads) == (48, 1536)
    assert arch.tie_word_embeddings


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (
            {**KIMI_LINEAR_48B, "linear_attn_config": {
                **KIMI_LINEAR_48B["linear_attn_config"], "kda_layers": [1, 2, 3]}},
            "linear_attn_config.kda_layers",
        ),
        ({**KIMI_LINEAR_48B, "linear_attn_config": None}, "linear_attn_config"),
        ({**KIMI_LINEAR_48B, "kv_lora_rank": None}, "kv_lora_rank"),
        ({**MINIMAX_M1, "attn_type_list": [0, 1] * 8}, "attn_type_list"),
    ],
)  # fmt: skip
def test_bad_linear_configs_name_the_key(config: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArchitecture) as raised:
        read_config(config)
    assert raised.value.field == field, raised.value.message


# https://huggingface.co/XiaomiMiMo/MiMo-7B-RL/blob/main/config.json
MIMO_7B: dict[str, Any] = {
    "model_type": "mimo", "attention_bias": True, "hidden_size": 4096,
    "intermediate_size": 11008, "max_position_embeddings": 32768, "num_attention_heads": 32,
    "num_hidden_layers": 36, "num_key_value_heads": 8, "num_nextn_predict_layers": 1,
    "tie_word_embeddings": False, "vocab_size": 151680,
}  # fmt: skip


def test_mtp_layers_are_neither_loaded_nor_priced() -> None:
    """MiMo-7B is Qwen2's stack plus one MTP layer that vLLM's loader skips unless it serves
    speculative decoding (no request field asks for it). Parameters without it, by hand:
    tables 2 x 151,680 x 4,096 = 1,242,562,560; a layer 4,096 x (4,096 + 2 x 1,024) +
    4,096 x 4,096 + 3 x 4,096 x 11,008 = 177,209,344, x 36: 7,622,098,944."""
    read = read_config(MIMO_7B)
    assert read.architecture.num_layers == 36 and read.architecture.qkv_bias
    assert parameter_count(read.architecture) == 7_622_098_944
    assert any(n.startswith("1 multi-token-prediction layer(s) not loaded") for n in read.notes)
    kimi_notes = read_config({**KIMI_LINEAR_48B, "num_nextn_predict_layers": 2}).notes
    assert any(n.startswith("2 multi-token-prediction layer(s)") for n in kimi_notes)
