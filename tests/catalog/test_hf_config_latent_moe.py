"""Nemotron 3 Super's config.json (nemotron_h with `moe_latent_size`) read as vLLM's
NemotronHMoE builds it: the catalogue entry reproduced, the parameter count by hand against the
published 120B-A12B, and a quote through the one pricing path."""

from __future__ import annotations

from typing import Any

import orjson

from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.memory import active_parameter_count, parameter_count
from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

# https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8/blob/main/config.json, the
# keys NemotronHConfig reads, as aiconfigurator-core 0.12.0 ships the file verbatim
# (aiconfigurator_core/model_configs/nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8_config.json)
SUPER: dict[str, Any] = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hidden_size": 4096,
    "num_hidden_layers": 88,
    "hybrid_override_pattern": (
        "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME"
    ),
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128,
    "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 128,
    "conv_kernel": 4, "chunk_size": 128, "expand": 2, "mamba_ssm_cache_dtype": "float32",
    "mlp_hidden_act": "relu2", "intermediate_size": 2688,
    "n_routed_experts": 512, "num_experts_per_tok": 22, "moe_intermediate_size": 2688,
    "moe_latent_size": 1024, "n_shared_experts": 1, "moe_shared_expert_intermediate_size": 5376,
    "num_nextn_predict_layers": 1, "vocab_size": 131072, "max_position_embeddings": 262144,
    "tie_word_embeddings": False, "dtype": "bfloat16",
}  # fmt: skip


def test_config_reads_as_the_catalogue_entry() -> None:
    read = read_config(SUPER)
    for repo in ("FP8", "NVFP4"):
        record = load_model_catalog().get(f"nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-{repo}")
        assert read.architecture == record.require_architecture()
    arch = read.architecture
    assert (arch.num_mamba_layers, arch.num_attention_layers, arch.num_moe_layers) == (40, 8, 40)
    assert (arch.moe_latent_size, arch.expert_width, arch.shared_expert_width) == (1024, 2688, 5376)


def test_parameters_by_hand() -> None:
    """40 Mamba-2 layers (in_proj 4096 x (2 x 8192 + 2 x 8 x 128 + 128), conv 10240 x 4,
    out_proj 8192 x 4096), 8 attention layers (4096 x (32 + 2 x 2) x 128 + 4096 x 4096),
    40 MoE layers (512 experts of up and down 1024 x 2688 in the latent, a 4096 -> 5376 -> 4096
    shared expert, a 512 x 4096 router, the 4096 x 1024 projections both ways), untied
    131072 x 4096 tables. The name publishes 120B total, 12B active."""
    h = 4096
    mamba = h * 18560 + 10240 * 4 + 8192 * h
    attention = h * (32 + 4) * 128 + 4096 * h
    expert = 2 * 1024 * 2688
    moe_rest = 2 * h * 5376 + 512 * h + 2 * h * 1024
    tables = 2 * 131072 * h
    total = 40 * mamba + 8 * attention + 40 * (512 * expert + moe_rest) + tables
    active = 40 * mamba + 8 * attention + 40 * (22 * expert + moe_rest) + tables
    arch = read_config(SUPER).architecture
    assert parameter_count(arch) == total == 120_667_570_176
    assert active_parameter_count(arch) == active
    assert abs(total / 120e9 - 1) < 0.01
    assert abs(active / 12e9 - 1) < 0.07


def test_super_and_ultra_are_quoted() -> None:
    """Each catalogued Nemotron 3 Super/Ultra by name, and Super's config.json, price."""
    estimator = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    workload = {"batch_size": 4, "prompt_tokens": 900, "output_tokens": 200}
    cases = [
        ({"model": "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"}, 2),
        ({"model": "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"}, 1),
        ({"architecture": SUPER}, 4),
        ({"model": "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4"}, 4),
    ]
    requests = [
        EstimateRequest.model_validate(
            {
                **named,
                "workload": workload,
                "hardware": {"gpu": "H200-SXM-141GB", "count": count},
                "datacenter": {"region": "FR"},
            }
        )
        for named, count in cases
    ]
    for (named, _), priced in zip(cases, estimator.price(requests), strict=True):
        assert isinstance(priced, PricedRequest), (named, priced)
        document = orjson.loads(priced.document.text())
        assert document["energy"]["gpu_j"] > 0 and document["latency"]["total_s"] > 0
