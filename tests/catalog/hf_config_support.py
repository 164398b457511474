"""Published config.json fixtures (tests/catalog/fixtures), each with its source."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# https://huggingface.co/nvidia/NVIDIA-Nemotron-Nano-9B-v2/blob/main/config.json (the keys
# NemotronHConfig reads): 27 Mamba-2 blocks (M), 4 attention blocks (*), 25 MLP blocks (-).
# Read by the config reader's tests and the API's hybrid quote test.
NEMOTRON_NANO_9B_V2: dict[str, Any] = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hidden_size": 4480,
    "intermediate_size": 15680,
    "num_hidden_layers": 56,
    "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "mamba_num_heads": 128,
    "mamba_head_dim": 80,
    "ssm_state_size": 128,
    "n_groups": 8,
    "conv_kernel": 4,
    "chunk_size": 128,
    "expand": 2,
    "mamba_hidden_act": "silu",
    "mlp_hidden_act": "relu2",
    "use_bias": False,
    "use_conv_bias": True,
    "vocab_size": 131072,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "rms_norm_eps": 1e-05,
    "torch_dtype": "bfloat16",
}


@cache
def published_configs(name: str) -> dict[str, dict[str, Any]]:
    """repo id -> config.json, from fixtures/<name>.json (every entry names its source)."""
    document = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    entries = document["configs"]
    assert all(e["source"].startswith("https://huggingface.co/") for e in entries.values())
    return {repo: entry["config"] for repo, entry in entries.items()}


def catalogued_configs() -> dict[str, dict[str, Any]]:
    """Configs of models the catalogue has an entry of."""
    return published_configs("catalogued_configs")


def uncatalogued_configs() -> dict[str, dict[str, Any]]:
    """Configs of model types the catalogue has no entry of."""
    return published_configs("uncatalogued_configs")


def priced_documents(
    bodies: Sequence[dict[str, Any]], *, verbose: bool = False
) -> list[dict[str, Any]]:
    """Each estimate request body priced in one pass of the one pricing path, regressor
    included, as its response document (every one must be priced)."""
    estimator = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    requests = [EstimateRequest.model_validate(body) for body in bodies]
    documents = []
    for quote in estimator.price(requests, verbose=verbose):
        assert isinstance(quote, PricedRequest), quote
        documents.append(orjson.loads(quote.document.text()))
    return documents
