"""Hybrid stacks' published config.json files, read as their config classes and vLLM's model
files read them; expectations worked by hand from each config."""

from __future__ import annotations

from typing import Any

import pytest
from hf_config_support import NEMOTRON_NANO_9B_V2

from service.catalog.hf_config import read_config
from service.core.architecture import ModelArchitecture
from service.core.cost_model_errors import InvalidArchitecture, UnsupportedArchitecture
from service.core.memory import active_parameter_count, parameter_count
from service.core.mixers import DeltaNetShape, MambaShape

# https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json
QWEN3_NEXT_80B: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "attention_bias": False,
    "decoder_sparse_step": 1,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "moe_intermediate_size": 512,
    "norm_topk_prob": True,
    "num_attention_heads": 16,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "num_hidden_layers": 48,
    "num_key_value_heads": 2,
    "partial_rotary_factor": 0.25,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000000,
    "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}


def test_nemotron_nano_9b_v2_reads_as_worked_out() -> None:
    """27 M, 4 *, 25 - blocks; squared-ReLU MLPs, no positional encoding in attention."""
    read = read_config(NEMOTRON_NANO_9B_V2)
    assert read.architecture == ModelArchitecture(
        hidden_size=4480, num_layers=56, num_attention_heads=40, num_key_value_heads=8,
        head_dim=128, intermediate_size=15680, vocab_size=131072, max_context_tokens=131072,
        mlp="plain", activation="relu", position="none",
        mamba=MambaShape(num_heads=128, head_dim=80, state_size=128, n_groups=8, conv_kernel=4,
                         chunk_size=128),
        num_mamba_layers=27, num_mixer_free_layers=25, num_mlp_free_layers=31,
    )  # fmt: skip


def test_nemotron_nano_9b_v2_parameters_by_hand() -> None:
    """Tables 2 x 131072 x 4480 = 1,174,405,120; attention 4 x (4480 x (5120 + 2 x 1024) +
    5120 x 4480) = 220,200,960; Mamba-2 27 x (4480 x 22656 + 12288 x 4 + 10240 x 4480) =
    3,980,427,264 (in_proj 2 x 10240 + 2 x 8 x 128 + 128 = 22656 wide); MLP 25 x 2 x 4480 x
    15680 = 3,512,320,000: 8,887,353,344, the 8.89B the model card states."""
    assert parameter_count(read_config(NEMOTRON_NANO_9B_V2).architecture) == 8_887_353_344


def test_nemotron_h_block_list_spelling_and_moe_blocks() -> None:
    """Nemotron 3's `layers_block_type` list with MoE blocks (E): each a mixture of 128
    squared-ReLU experts, top 6, beside a shared expert; the SSM state in fp32 as stated."""
    config = {
        "model_type": "nemotron_h", "hidden_size": 2688, "num_attention_heads": 32,
        "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 131072,
        "layers_block_type": ["mamba", "moe", "attention", "moe"],
        "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8,
        "n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
        "moe_shared_expert_intermediate_size": 3712, "mamba_ssm_cache_dtype": "float32",
    }  # fmt: skip
    arch = read_config(config).architecture
    assert (arch.num_layers, arch.num_mamba_layers, arch.num_attention_layers) == (4, 1, 1)
    assert (arch.num_moe_layers, arch.num_dense_mlp_layers, arch.num_experts) == (2, 0, 128)
    assert (arch.experts_per_token, arch.moe_intermediate_size) == (6, 1856)
    assert arch.shared_expert_width == 3712
    assert arch.mamba is not None and arch.mamba.state_fp32


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_hidden_layers": 55}, "hybrid_override_pattern"),
        ({"hybrid_override_pattern": "M-X*"}, "hybrid_override_pattern"),
        ({"moe_latent_size": 0}, "moe_latent_size"),
        ({"mamba_num_heads": 0}, "mamba_num_heads"),
    ],
)
def test_bad_nemotron_h_configs_name_the_key(change: dict[str, Any], field: str) -> None:
    config = {**NEMOTRON_NANO_9B_V2, **change}
    if "X" in str(change.get("hybrid_override_pattern")):
        config["num_hidden_layers"] = 4
    with pytest.raises((InvalidArchitecture, UnsupportedArchitecture)) as raised:
        read_config(config)
    assert raised.value.field == field


def test_qwen3_next_reads_as_worked_out() -> None:
    """Every 4th of 48 layers full attention (12), 36 gated DeltaNet; 512 experts top-10 and a
    shared expert on all 48; q_proj gated (2 x 16 x 256 wide)."""
    arch = read_config(QWEN3_NEXT_80B).architecture
    assert arch.delta_net == DeltaNetShape(16, 32, 128, 128, conv_kernel=4)
    assert (arch.num_delta_net_layers, arch.num_attention_layers) == (36, 12)
    assert (arch.num_moe_layers, arch.num_experts, arch.experts_per_token) == (48, 512, 10)
    assert arch.attention_output_gate and arch.q_proj_width == 8192


def test_qwen3_next_parameters_by_hand() -> None:
    """Attention 12 x (2048 x (8192 + 2 x 512) + 4096 x 2048) = 327,155,712; gated DeltaNet
    36 x (2048 x 12352 + 8192 x 4 + 4096 x 2048) = 1,213,857,792 (in_proj q, k, v, z, b, a:
    2 x 2048 + 2 x 4096 + 2 x 32 = 12352; conv over 8192 channels); experts 48 x 513 x 3 x
    2048 x 512 = 77,460,406,272 with the shared one; router 48 x 2048 x 512 = 50,331,648;
    tables 2 x 151936 x 2048 = 622,329,856: 79,674,081,280 (the "80B" of the model card)."""
    arch = read_config(QWEN3_NEXT_80B).architecture
    assert parameter_count(arch) == 79_674_081_280
    # 10 of 512 routed experts active: 79,674,081,280 - 48 x 502 x 3 x 2048 x 512
    assert active_parameter_count(arch) == 79_674_081_280 - 48 * 502 * 3 * 2048 * 512
