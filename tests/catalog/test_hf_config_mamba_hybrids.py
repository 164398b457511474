"""Granite 4.0-H, Falcon-H1, Bamba, Mamba-2, Jamba and Qwen3.5 configs, read as their transformers
config classes read them; parameter counts worked by hand against each model card."""

from __future__ import annotations

from typing import Any

import pytest

from service.catalog.hf_config import read_config
from service.core.cost_model_errors import InvalidArchitecture, UnsupportedArchitecture
from service.core.memory import active_parameter_count, parameter_count
from service.core.mixers import DeltaNetShape, MambaShape

# https://huggingface.co/ibm-granite/granite-4.0-h-small/blob/main/config.json: the keys
# GraniteMoeHybridConfig reads; its layer_types hold 36 mamba and 4 attention entries
GRANITE_4_H_SMALL: dict[str, Any] = {
    "model_type": "granitemoehybrid", "hidden_size": 4096, "num_hidden_layers": 40,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 72,
    "num_experts_per_tok": 10, "shared_intermediate_size": 1536, "intermediate_size": 768,
    "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_n_heads": 128,
    "mamba_d_head": 64, "mamba_n_groups": 1, "mamba_chunk_size": 256,
    "position_embedding_type": "nope", "max_position_embeddings": 131072,
    "layer_types": ["mamba"] * 5 + ["attention"] + (["mamba"] * 9 + ["attention"]) * 3
    + ["mamba"] * 4,
    "tie_word_embeddings": True, "vocab_size": 100352, "torch_dtype": "bfloat16",
}  # fmt: skip
# https://huggingface.co/tiiuae/Falcon-H1-1.5B-Base/blob/main/config.json (the keys FalconH1Config
# reads)
FALCON_H1_1_5B: dict[str, Any] = {
    "model_type": "falcon_h1", "num_hidden_layers": 24, "hidden_size": 2048,
    "intermediate_size": 4608, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 128, "vocab_size": 65537, "mamba_d_state": 256, "mamba_d_conv": 4,
    "mamba_n_groups": 1, "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_d_ssm": 3072,
    "tie_word_embeddings": False,
}  # fmt: skip
# https://huggingface.co/mistralai/Mamba-Codestral-7B-v0.1/blob/main/config.json
MAMBA_CODESTRAL: dict[str, Any] = {
    "model_type": "mamba2", "hidden_size": 4096, "num_heads": 128, "head_dim": 64,
    "n_groups": 8, "state_size": 128, "num_hidden_layers": 64, "vocab_size": 32768,
    "expand": 2, "conv_kernel": 4, "chunk_size": 256, "tie_word_embeddings": False,
}  # fmt: skip


def test_granite_4_h_small_by_hand() -> None:
    """Attention 4 x (4096 x (4096 + 2 x 1024) + 4096 x 4096) = 167,772,160; Mamba-2 36 x
    (4096 x 16,768 + 8,448 x 4 + 8192 x 4096) = 3,681,718,272 (d_inner 8192, in_proj 2 x 8192 +
    2 x 128 + 128, conv over 8192 + 256); experts 40 x 72 x 3 x 4096 x 768 = 27,179,089,920;
    shared 40 x 3 x 4096 x 1536 = 754,974,720; router 40 x 4096 x 72 = 11,796,480; one tied
    table 100,352 x 4096 = 411,041,792: 32,206,393,344, the model card's 32B."""
    arch = read_config(GRANITE_4_H_SMALL).architecture
    assert (arch.num_attention_layers, arch.num_mamba_layers, arch.num_moe_layers) == (4, 36, 40)
    assert arch.mamba == MambaShape(128, 64, 128, 1, 4, 256)
    assert arch.position == "none" and arch.shared_expert_width == 1536
    assert parameter_count(arch) == 32_206_393_344


def test_granite_without_experts_runs_its_shared_mlp_alone() -> None:
    arch = read_config({**GRANITE_4_H_SMALL, "num_local_experts": 0}).architecture
    assert not arch.is_moe and arch.intermediate_size == 1536


def test_falcon_h1_runs_attention_and_mamba_side_by_side() -> None:
    """Every one of the 24 layers attends and runs a Mamba-2 mixer of 48 heads of 64 (d_ssm
    3072). Attention 24 x (2048 x (1024 + 512) + 1024 x 2048) = 125,829,120; Mamba-2 24 x
    (2048 x 6,704 + 3,584 x 4 + 3072 x 2048) = 480,854,016 (in_proj 2 x 3072 + 2 x 256 + 48);
    MLP 24 x 3 x 2048 x 4608 = 679,477,248; tables 2 x 65,537 x 2048 = 268,439,552:
    1,554,599,936, the model card's 1.5B."""
    arch = read_config(FALCON_H1_1_5B).architecture
    assert (arch.num_attention_layers, arch.num_mamba_layers) == (24, 24)
    assert arch.parallel_mixers and arch.num_dense_mlp_layers == 24
    assert parameter_count(arch) == 1_554_599_936


def test_mamba_codestral_is_mamba_alone() -> None:
    """64 Mamba-2 layers, no attention, no MLP: 64 x (4096 x 18,560 + 10,240 x 4 + 8192 x 4096)
    = 7,015,497,728 (in_proj 2 x 8192 + 2 x 8 x 128 + 128) + 2 x 32768 x 4096 = 268,435,456:
    7,283,933,184 (the model card's 7.3B)."""
    arch = read_config(MAMBA_CODESTRAL).architecture
    assert (arch.num_attention_layers, arch.num_mamba_layers, arch.num_mlp_layers) == (0, 64, 0)
    assert parameter_count(arch) == 7_283_933_184


def test_bamba_attends_on_the_listed_layers() -> None:
    arch = read_config(
        {"model_type": "bamba", "num_hidden_layers": 32, "attn_layer_indices": [9, 18, 27]}
    ).architecture
    assert (arch.num_attention_layers, arch.num_mamba_layers, arch.num_dense_mlp_layers) == (
        3,
        29,
        32,
    )
    assert arch.mamba == MambaShape(128, 64, 256, 1, 4, 256)  # 2 x 4096 / 128 heads


def test_qwen3_5_class_defaults() -> None:
    """An empty Qwen3.5 config is Qwen3_5TextConfig's default (the 9B shape): 32 layers, every
    4th attends; an empty Qwen3.5-MoE one has 40 layers of 256 experts, top 8."""
    dense = read_config({"model_type": "qwen3_5"}).architecture
    assert (dense.hidden_size, dense.num_layers, dense.intermediate_size) == (4096, 32, 12288)
    assert (dense.num_delta_net_layers, dense.num_attention_layers, dense.is_moe) == (24, 8, False)
    assert dense.delta_net == DeltaNetShape(16, 32, 128, 128)
    moe = read_config({"model_type": "qwen3_5_moe", "text_config": {"mamba_ssm_dtype": "float32"}})
    arch = moe.architecture
    assert (arch.num_layers, arch.num_delta_net_layers, arch.num_experts) == (40, 30, 256)
    assert arch.experts_per_token == 8 and arch.delta_net is not None and arch.delta_net.state_fp32
    assert "vision encoder not modelled; text decoder only" in moe.notes


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({**GRANITE_4_H_SMALL, "layer_types": ["mamba"] * 39}, "layer_types"),
        ({**FALCON_H1_1_5B, "mamba_n_heads": 7, "mamba_d_head": "auto"}, "mamba_n_heads"),
        ({"model_type": "bamba", "attn_layer_indices": [40]}, "attn_layer_indices"),
        ({"model_type": "mamba", "time_step_rank": "fast"}, "time_step_rank"),
    ],
)
def test_bad_configs_name_the_key(config: dict[str, Any], field: str) -> None:
    with pytest.raises((InvalidArchitecture, UnsupportedArchitecture)) as raised:
        read_config(config)
    assert raised.value.field == field


def test_a_catalogue_entry_round_trips_the_mixer_shapes() -> None:
    """A catalogue entry written from a read config (dataclasses.asdict) reads back the same
    architecture, nested Mamba-2 and gated-DeltaNet shapes included."""
    from dataclasses import asdict

    from service.catalog.models import architecture_from_entry

    for config in (GRANITE_4_H_SMALL, {"model_type": "qwen3_5_moe"}):
        arch = read_config(config).architecture
        assert architecture_from_entry(asdict(arch)) == arch


# https://huggingface.co/ai21labs/Jamba-v0.1/blob/main/config.json (the keys JambaConfig reads;
# Jamba 1.5 Mini has the same shape)
JAMBA_V0_1: dict[str, Any] = {
    "model_type": "jamba", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_experts": 16, "num_experts_per_tok": 2, "expert_layer_period": 2,
    "expert_layer_offset": 1, "attn_layer_period": 8, "attn_layer_offset": 4,
    "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 256,
    "vocab_size": 65536, "max_position_embeddings": 262144, "tie_word_embeddings": False,
}  # fmt: skip


def test_jamba_by_hand() -> None:
    """Layers 4, 12, 20, 28 attend (no positional encoding), 28 run Mamba-1; odd layers route to
    16 experts (top 2). Attention 4 x (4096 x (4096 + 2 x 1024) + 4096 x 4096) = 167,772,160;
    Mamba-1 28 x (4096 x 16384 in_proj + 8192 x 4 conv + 8192 x (256 + 2 x 16) x_proj + 256 x
    8192 dt_proj + 8192 x 4096 out_proj) = 2,944,270,336; dense MLPs 16 x 3 x 4096 x 14336 =
    2,818,572,288; experts 16 x 16 x 3 x 4096 x 14336 = 45,097,156,608; router 16 x 4096 x 16 =
    1,048,576; tables 2 x 65536 x 4096 = 536,870,912: 51,565,690,880 (the card's 52B), of which
    12,105,678,848 active (2 of 16 experts: the card's 12B)."""
    arch = read_config(JAMBA_V0_1).architecture
    assert (arch.num_attention_layers, arch.num_mamba_layers, arch.num_moe_layers) == (4, 28, 16)
    assert arch.mamba == MambaShape(8192, 1, 16, 1, 4, dt_rank=256)
    assert arch.position == "none"
    assert parameter_count(arch) == 51_565_690_880
    assert active_parameter_count(arch) == 12_105_678_848
    # dt_rank "auto" is ceil(hidden / 16)
    auto = read_config(
        {**JAMBA_V0_1, "mamba_dt_rank": "auto", "hidden_size": 4100, "head_dim": 128}
    )
    assert auto.architecture.mamba is not None and auto.architecture.mamba.dt_rank == 257
