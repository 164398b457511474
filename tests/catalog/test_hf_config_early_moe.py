"""DBRX and DeepSeek-MoE config.json files read as their loaders read them: the catalogue entry
reproduced, the parameter count worked out by hand from the config's numbers against the
published size, the class defaults, and a quote through the one pricing path."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.cost_model_errors import InvalidArchitecture
from service.core.memory import active_parameter_count, parameter_count
from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

# https://huggingface.co/databricks/dbrx-base/blob/main/config.json (its shapes also in vLLM's
# tests/config/base_model_arch_groundtruth.json for dbrx-instruct: 6144 hidden, 40 layers,
# 48 heads, 8 KV heads, 100352 tokens)
DBRX_BASE: dict[str, Any] = {
    "architectures": ["DbrxForCausalLM"],
    "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "model_type": "", "rope_theta": 500000},
    "d_model": 6144,
    "emb_pdrop": 0.0,
    "ffn_config": {"ffn_hidden_size": 10752, "model_type": "", "moe_jitter_eps": 0.01,
                   "moe_loss_weight": 0.05, "moe_num_experts": 16, "moe_top_k": 4},
    "initializer_range": 0.02,
    "max_seq_len": 32768,
    "model_type": "dbrx",
    "n_heads": 48,
    "n_layers": 40,
    "output_router_logits": False,
    "resid_pdrop": 0.0,
    "router_aux_loss_coef": 0.05,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 100352,
}  # fmt: skip
# https://huggingface.co/deepseek-ai/deepseek-moe-16b-base/blob/main/config.json
DEEPSEEK_MOE_16B: dict[str, Any] = {
    "architectures": ["DeepseekForCausalLM"],
    "model_type": "deepseek",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "max_position_embeddings": 4096,
    "vocab_size": 102400,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
CONFIGS = {"databricks/dbrx-base": DBRX_BASE, "deepseek-ai/deepseek-moe-16b-base": DEEPSEEK_MOE_16B}


@pytest.mark.parametrize("repo_id", sorted(CONFIGS))
def test_config_reads_as_the_catalogue_entry(repo_id: str) -> None:
    record = load_model_catalog().get(repo_id)
    read = read_config(CONFIGS[repo_id])
    assert read.architecture == record.require_architecture()
    assert read.published_precision is record.published_precision


def test_dbrx_is_sixteen_experts_top_four_on_every_layer() -> None:
    arch = read_config(DBRX_BASE).architecture
    assert (arch.hidden_size, arch.num_layers, arch.num_attention_heads) == (6144, 40, 48)
    assert (arch.num_key_value_heads, arch.head_dim) == (8, 128)
    assert (arch.num_experts, arch.experts_per_token, arch.num_moe_layers) == (16, 4, 40)
    assert arch.expert_width == 10752 and arch.num_shared_experts == 0
    assert (arch.norm, arch.mlp, arch.tie_word_embeddings) == ("layernorm", "gated", False)


def test_dbrx_parameters_by_hand() -> None:
    """Per layer: q and o 6144 x 6144, k and v 6144 x 1024, 16 gated experts of 3 x 6144 x
    10752, a 16 x 6144 router; untied 100352 x 6144 embeddings and head. The model card
    publishes 132B total, 36B active."""
    h, f, e, k, v = 6144, 10752, 16, 4, 100352
    attention = 2 * h * h + 2 * h * 8 * 128
    expert = 3 * h * f
    total = 40 * (attention + e * expert + e * h) + 2 * v * h
    active = 40 * (attention + k * expert + e * h) + 2 * v * h
    arch = read_config(DBRX_BASE).architecture
    assert parameter_count(arch) == total
    assert active_parameter_count(arch) == active
    assert abs(total / 132e9 - 1) < 0.01
    assert abs(active / 36e9 - 1) < 0.02


def test_deepseek_moe_has_a_dense_first_layer_and_two_shared_experts() -> None:
    arch = read_config(DEEPSEEK_MOE_16B).architecture
    assert (arch.num_layers, arch.num_moe_layers, arch.num_dense_mlp_layers) == (28, 27, 1)
    assert (arch.num_experts, arch.experts_per_token, arch.expert_width) == (64, 6, 1408)
    assert arch.shared_expert_width == 2 * 1408
    assert (arch.num_key_value_heads, arch.head_dim, arch.mla) == (16, 128, None)


def test_deepseek_moe_parameters_by_hand() -> None:
    """Attention 4 x 2048^2 per layer; layer 0 a 10944-wide gated MLP; 27 layers of 64 routed
    experts and a 2816-wide shared one, each 1408 wide, and a 64 x 2048 router; untied
    102400 x 2048 embeddings. The paper (arXiv:2401.06066) publishes 16.4B total, 2.8B active."""
    h, v = 2048, 102400
    attention = 4 * h * h
    dense = 3 * h * 10944
    routed, shared, router = 3 * h * 1408, 3 * h * 2816, 64 * h
    total = 28 * attention + dense + 27 * (64 * routed + shared + router) + 2 * v * h
    active = 28 * attention + dense + 27 * (6 * routed + shared + router) + 2 * v * h
    arch = read_config(DEEPSEEK_MOE_16B).architecture
    assert parameter_count(arch) == total
    assert active_parameter_count(arch) == active
    assert abs(total / 16.4e9 - 1) < 0.01
    assert abs(active / 2.8e9 - 1) < 0.02


def test_class_defaults_stand_for_absent_keys() -> None:
    """DbrxConfig: 4 experts top-1 of width 3584, one KV head; DeepseekConfig: no experts
    unless n_routed_experts is given, heads as KV heads."""
    dbrx = read_config({"model_type": "dbrx"}).architecture
    assert (dbrx.hidden_size, dbrx.num_layers, dbrx.num_attention_heads) == (2048, 24, 16)
    assert (dbrx.num_key_value_heads, dbrx.num_experts, dbrx.experts_per_token) == (1, 4, 1)
    assert dbrx.expert_width == 3584
    deepseek = read_config({"model_type": "deepseek"}).architecture
    assert (deepseek.num_experts, deepseek.num_key_value_heads, deepseek.hidden_size) == (
        0,
        32,
        4096,
    )


def test_dbrx_tied_embeddings_are_refused_naming_the_key() -> None:
    with pytest.raises(InvalidArchitecture) as error:
        read_config({**DBRX_BASE, "tie_word_embeddings": True})
    assert error.value.field == "tie_word_embeddings"


def test_configs_are_quoted_as_the_catalogue_models() -> None:
    """Through the one pricing path: the config.json and the catalogue id price alike."""
    estimator = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    common = {
        "workload": {"batch_size": 4, "prompt_tokens": 900, "output_tokens": 200},
        "hardware": {"gpu": "H200-SXM-141GB", "count": 4},
        "datacenter": {"region": "FR"},
    }
    requests = []
    for repo_id, config in CONFIGS.items():
        requests.append(EstimateRequest.model_validate({"model": repo_id, **common}))
        requests.append(EstimateRequest.model_validate({"architecture": config, **common}))
    priced = estimator.price(requests)
    for i, repo_id in enumerate(CONFIGS):
        by_name, by_config = priced[2 * i], priced[2 * i + 1]
        assert isinstance(by_name, PricedRequest), (repo_id, by_name)
        assert isinstance(by_config, PricedRequest), (repo_id, by_config)
        name_doc = orjson.loads(by_name.document.text())
        config_doc = orjson.loads(by_config.document.text())
        assert config_doc["energy"] == name_doc["energy"], repo_id
        assert name_doc["energy"]["gpu_j"] > 0 and name_doc["latency"]["total_s"] > 0
