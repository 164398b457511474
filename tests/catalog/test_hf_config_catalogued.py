"""A published config.json of a catalogued model reads as that model's catalogue entry: the same
architecture, the same published precision, and so the same quote."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hf_config_support import catalogued_configs

from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

CONFIGS = catalogued_configs()
# What the catalogue entries name their models' model_types as (every family the fixtures hold).
MODEL_TYPES = {
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
    "phi3", "phi", "starcoder2", "gpt_oss", "deepseek_v3", "llama4", "llava", "chameleon", "gptj",
    "opt",
}  # fmt: skip


def test_the_fixtures_cover_the_catalogued_model_types() -> None:
    assert {config["model_type"] for config in CONFIGS.values()} == MODEL_TYPES


@pytest.mark.parametrize("repo_id", sorted(CONFIGS))
def test_config_reads_as_the_catalogue_entry(repo_id: str) -> None:
    record = load_model_catalog().get(repo_id)
    read = read_config(CONFIGS[repo_id])
    assert read.architecture == record.require_architecture()
    assert read.published_precision is record.published_precision


QUOTED = {
    "meta-llama/Llama-3.1-8B-Instruct": {"gpu": "H100-SXM5-80GB", "count": 1},
    "Qwen/Qwen3-30B-A3B": {"gpu": "H100-SXM5-80GB", "count": 2},
    "google/gemma-3-27b-it": {"gpu": "H100-SXM5-80GB", "count": 1},
    "openai/gpt-oss-20b": {"gpu": "H100-SXM5-80GB", "count": 1},
    "deepseek-ai/DeepSeek-V3": {"gpu": "H200-SXM-141GB", "count": 8},
}


def _numbers(priced: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    assert isinstance(priced, PricedRequest), priced
    document = orjson.loads(priced.document.text())
    return document["energy"], document["latency"], document["carbon"]


def test_config_is_quoted_as_the_catalogue_model() -> None:
    """Through the one pricing path, regressor included: energy, latency and carbon equal."""
    estimator = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    workload = {"batch_size": 4, "prompt_tokens": 900, "output_tokens": 200}
    requests = []
    for repo_id, hardware in QUOTED.items():
        common = {"workload": workload, "hardware": hardware, "datacenter": {"region": "FR"}}
        requests.append(EstimateRequest.model_validate({"model": repo_id, **common}))
        requests.append(
            EstimateRequest.model_validate({"architecture": CONFIGS[repo_id], **common})
        )
    priced = estimator.price(requests)
    for i, repo_id in enumerate(QUOTED):
        by_name, by_config = _numbers(priced[2 * i]), _numbers(priced[2 * i + 1])
        assert by_config == by_name, repo_id
        assert by_name[0]["gpu_j"] > 0
