"""The LiteLLM callback's reading of deployments and requests (no LiteLLM needed): the
operator's mapping found inline in model_info or by id, group or model string, token budgets,
and the estimate body built from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_energy_quotes_client.litellm_deployments import (
    DeploymentQuoting,
    deployment_id,
    deployment_quoting,
    estimate_request,
    load_deployments,
    metadata_bucket,
    output_tokens,
)

H100_PAIR = DeploymentQuoting(
    model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM5-80GB", count=2
)


def routed(**extra: object) -> dict[str, object]:
    """Deployment-hook kwargs as LiteLLM's router shapes them (model_info copied to both)."""
    model_info = {"id": "dep-1", **extra}
    return {
        "model": "openai/llama-8b",
        "model_info": model_info,
        "metadata": {"model_group": "llama", "model_info": model_info},
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_inline_mapping_wins_over_the_configured_ones() -> None:
    inline = {"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": "L4", "count": 1, "region": "FR"}
    kwargs = routed(energy_quote=inline)
    found = deployment_quoting(kwargs, {"dep-1": H100_PAIR})
    assert found == DeploymentQuoting(model="Qwen/Qwen2.5-7B-Instruct", gpu="L4", region="FR")


@pytest.mark.parametrize("key", ["dep-1", "llama", "openai/llama-8b"])
def test_configured_mapping_by_id_group_or_model(key: str) -> None:
    assert deployment_quoting(routed(), {key: H100_PAIR}) == H100_PAIR


def test_an_unmapped_deployment_is_not_quoted_and_typos_are_refused() -> None:
    assert deployment_quoting(routed(), {"other": H100_PAIR}) is None
    with pytest.raises(ValueError, match="gpus"):
        deployment_quoting(routed(energy_quote={"model": "m", "gpus": "L4"}), {})


def test_the_metadata_bucket_and_deployment_id_follow_litellm() -> None:
    assert metadata_bucket({"metadata": {}}) == "metadata"
    assert metadata_bucket({"metadata": {}, "litellm_metadata": {}}) == "litellm_metadata"
    assert deployment_id(routed()) == "dep-1"
    assert deployment_id({"model": "openai/x"}) == "openai/x"


def test_output_budget_from_the_request_else_the_deployment_default() -> None:
    assert output_tokens({"max_completion_tokens": 64, "max_tokens": 9}, 256) == 64
    assert output_tokens({"max_tokens": 9}, 256) == 9
    assert output_tokens({"max_output_tokens": 17}, 256) == 17
    assert output_tokens({"max_tokens": None}, 256) == 256
    assert output_tokens({"max_tokens": True}, 256) == 256


def test_estimate_body_is_one_sequence_on_the_deployment() -> None:
    quoting = DeploymentQuoting(
        model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM5-80GB", count=2, region="FR"
    )
    body = estimate_request(
        quoting, prompt_tokens=0, output_tokens=64, metadata={"litellm_call_id": "c1"}
    )
    assert body == {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "workload": {"batch_size": 1, "prompt_tokens": 1, "output_tokens": 64},
        "hardware": {"gpu": "H100-SXM5-80GB", "count": 2},
        "metadata": {"litellm_call_id": "c1"},
        "datacenter": {"region": "FR"},
    }


def test_a_deployments_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "deployments.json"
    path.write_text(
        json.dumps({"llama": {"model": H100_PAIR.model, "gpu": "H100-SXM5-80GB", "count": 2}})
    )
    assert load_deployments(path) == {"llama": H100_PAIR}
