"""What the LiteLLM callback reads from a deployment and a request: which model and GPUs to
quote (the operator's mapping), and the request's token counts. Plain functions over the
dictionaries LiteLLM passes; nothing here imports LiteLLM."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_energy_quotes_client.requests import EstimateRequest

MODEL_INFO_KEY = "energy_quote"
"""The key under a deployment's `model_info` (LiteLLM config.yaml) that holds its mapping."""


@dataclass(frozen=True)
class DeploymentQuoting:
    """How one deployment's requests are quoted: the catalogue `model` it serves (a Hugging
    Face repo id), the `gpu` id and `count` serving it, and optionally the serving `engine`,
    grid `region` and `pue`. `output_tokens` is assumed when a request sets no max_tokens."""

    model: str
    gpu: str
    count: int = 1
    engine: str | None = None
    region: str | None = None
    pue: float | None = None
    output_tokens: int = 256

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> DeploymentQuoting:
        """From the operator's YAML/JSON entry; unknown keys are refused (a typo would
        otherwise quote silently with a default)."""
        fields = set(cls.__dataclass_fields__)
        unknown = set(raw) - fields
        if unknown:
            raise ValueError(f"unknown keys in an energy_quote mapping: {sorted(unknown)}")
        return cls(**dict(raw))


def load_deployments(path: str | Path) -> dict[str, DeploymentQuoting]:
    """A JSON file `{"<deployment key>": {"model": ..., "gpu": ..., "count": ...}, ...}`;
    a key is a deployment's `model_info.id`, its model group (`model_name`) or its
    `litellm_params.model`."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    return {key: DeploymentQuoting.from_mapping(entry) for key, entry in raw.items()}


def metadata_bucket(kwargs: Mapping[str, Any]) -> str:
    """The kwargs key LiteLLM keeps its request metadata under (as LiteLLM itself decides:
    `litellm_metadata` where the endpoint uses it, else `metadata`)."""
    return "litellm_metadata" if "litellm_metadata" in kwargs else "metadata"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def deployment_quoting(
    kwargs: Mapping[str, Any], configured: Mapping[str, DeploymentQuoting]
) -> DeploymentQuoting | None:
    """The mapping of the deployment a request was routed to: its own `model_info.energy_quote`
    first, else `configured` by model_info id, model group, then the deployment's model
    string; None when the deployment is not mapped (its requests are not quoted)."""
    metadata = _dict(kwargs.get(metadata_bucket(kwargs)))
    model_info = _dict(kwargs.get("model_info")) or _dict(metadata.get("model_info"))
    inline = model_info.get(MODEL_INFO_KEY)
    if isinstance(inline, Mapping):
        return DeploymentQuoting.from_mapping(inline)
    for key in (model_info.get("id"), metadata.get("model_group"), kwargs.get("model")):
        if isinstance(key, str) and key in configured:
            return configured[key]
    return None


def deployment_id(kwargs: Mapping[str, Any]) -> str:
    """The deployment's id (`model_info.id`, which LiteLLM sets for every deployment), else its
    model string."""
    metadata = _dict(kwargs.get(metadata_bucket(kwargs)))
    model_info = _dict(kwargs.get("model_info")) or _dict(metadata.get("model_info"))
    return str(model_info.get("id") or kwargs.get("model") or "")


def output_tokens(kwargs: Mapping[str, Any], default: int) -> int:
    """The request's output budget: max_completion_tokens, max_tokens or max_output_tokens
    (the OpenAI chat, completions and responses names), else `default`."""
    for name in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        value = kwargs.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def estimate_request(
    quoting: DeploymentQuoting,
    *,
    prompt_tokens: int,
    output_tokens: int,
    metadata: Mapping[str, str],
) -> EstimateRequest:
    """The estimate of one request (one sequence) on the deployment."""
    body: EstimateRequest = {
        "model": quoting.model,
        "workload": {
            "batch_size": 1,
            "prompt_tokens": max(1, prompt_tokens),
            "output_tokens": max(1, output_tokens),
        },
        "hardware": {"gpu": quoting.gpu, "count": quoting.count},
        "metadata": dict(metadata),
    }
    if quoting.engine is not None:
        body["serving"] = {"engine": quoting.engine}
    if quoting.region is not None or quoting.pue is not None:
        body["datacenter"] = {}
        if quoting.region is not None:
            body["datacenter"]["region"] = quoting.region
        if quoting.pue is not None:
            body["datacenter"]["pue"] = quoting.pue
    return body
