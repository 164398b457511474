"""DeepSeek-V3.2's config.json (model_type deepseek_v32): DeepSeek-V3's layers plus DSA's
indexer shapes."""

from __future__ import annotations

import dataclasses

import pytest
from hf_config_support import catalogued_configs

from service.catalog.hf_config import read_config
from service.core.architecture import DsaShape
from service.core.cost_model_errors import InvalidArchitecture
from service.core.memory import parameter_count


def test_deepseek_v32_config_reads_the_indexer() -> None:
    # DeepSeek-V3.2-Exp's config.json is DeepSeek-V3's with model_type deepseek_v32 and the
    # indexer keys (https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json)
    v3 = catalogued_configs()["deepseek-ai/DeepSeek-V3"]
    raw = {
        **v3,
        "model_type": "deepseek_v32",
        "index_n_heads": 64,
        "index_head_dim": 128,
        "index_topk": 2048,
    }
    read = read_config(raw)
    assert read.architecture.dsa == DsaShape(64, 128, 2048)
    assert read.architecture.capped_window == 2048
    assert read.architecture == dataclasses.replace(
        read_config(v3).architecture, dsa=DsaShape(64, 128, 2048)
    )


# GLM-5's config.json (https://huggingface.co/zai-org/GLM-5/blob/main/config.json), the keys
# that shape its layers.
GLM_5 = {
    "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
    "hidden_size": 6144, "num_hidden_layers": 78, "num_attention_heads": 64,
    "num_key_value_heads": 64, "head_dim": 64, "vocab_size": 154880, "intermediate_size": 12288,
    "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
    "v_head_dim": 256, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "moe_intermediate_size": 2048, "first_k_dense_replace": 3, "moe_layer_freq": 1,
    "index_n_heads": 32, "index_head_dim": 128, "index_topk": 2048,
    "max_position_embeddings": 202752, "tie_word_embeddings": False, "dtype": "bfloat16",
}  # fmt: skip


def test_glm_5_reads_as_mla_with_dsa_and_its_published_size() -> None:
    """78 layers, the first 3 dense, 75 with 256 routed experts (top 8) and one shared; Z.ai
    states 744B parameters (https://huggingface.co/zai-org/GLM-5, model card)."""
    arch = read_config(GLM_5).architecture
    assert arch.dsa == DsaShape(32, 128, 2048)
    assert arch.mla is not None and arch.mla.v_head_dim == 256
    assert (arch.num_moe_layers, arch.num_experts, arch.experts_per_token) == (75, 256, 8)
    assert abs(parameter_count(arch) / 744e9 - 1) < 0.01


@pytest.mark.parametrize("key", ["n_routed_experts", "index_topk", "v_head_dim"])
def test_glm_5_needs_every_key_that_shapes_its_layers(key: str) -> None:
    config = {k: v for k, v in GLM_5.items() if k != key}
    with pytest.raises(InvalidArchitecture, match=f"{key} is required"):
        read_config(config)
