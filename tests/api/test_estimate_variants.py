"""POST /v1/estimate naming a variant of a catalogued model (fine-tune, dated release,
quantisation): priced as that model with a warning naming it, the quantisation suffix setting the
default weight precision; an unknown id's 422 lists near matches and the ways around it."""

from __future__ import annotations

from typing import Any

from api_support import example_body
from fastapi.testclient import TestClient

HARDWARE = {"gpu": "H100-SXM5-80GB", "count": 2}


def _quote(client: TestClient, model: str) -> dict[str, Any]:
    body = example_body(model=model, hardware=HARDWARE)
    response = client.post("/v1/estimate", json=body, params={"verbose": "true"})
    assert response.status_code == 200, response.text
    quote: dict[str, Any] = response.json()
    return quote


def test_a_dated_instruct_release_is_quoted_as_its_base(client: TestClient) -> None:
    # a dated release the catalogue has no config of (Qwen's own 2507 releases are entries)
    base = _quote(client, "Qwen/Qwen3-8B")
    variant = _quote(client, "Qwen/Qwen3-8B-Instruct-2507")
    assert variant["energy"] == base["energy"] and variant["latency"] == base["latency"]
    assert variant["model"] == "Qwen/Qwen3-8B"
    assert any(
        w.startswith(
            "Qwen/Qwen3-8B-Instruct-2507 is not in the catalogue: priced with the "
            "architecture of Qwen/Qwen3-8B"
        )
        for w in variant["warnings"]
    ), variant["warnings"]


def test_the_quantisation_suffix_sets_the_weights(client: TestClient) -> None:
    bf16 = _quote(client, "Qwen/Qwen3-30B-A3B")
    fp8 = _quote(client, "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8")
    awq = _quote(client, "Qwen/Qwen3-30B-A3B-AWQ")
    assert fp8["breakdown"]["defaulted_inputs"]["precision.weights"] == "fp8"
    assert awq["breakdown"]["defaulted_inputs"]["precision.weights"] == "int4"
    assert "weights default to fp8, as the name's suffix says" in fp8["warnings"]
    # lighter weights, less memory traffic per decode step
    assert (
        awq["latency"]["time_per_output_token_s"]
        < fp8["latency"]["time_per_output_token_s"]
        < bf16["latency"]["time_per_output_token_s"]
    )
    # explicit precision wins over the suffix: as the bf16 base
    body = example_body(
        model="Qwen/Qwen3-30B-A3B-AWQ", hardware=HARDWARE, precision={"weights": "bf16"}
    )
    explicit = client.post("/v1/estimate", json=body).json()
    assert explicit["energy"] == bf16["energy"]


def test_an_unknown_id_points_to_architecture_and_registration(client: TestClient) -> None:
    response = client.post("/v1/estimate", json=example_body(model="Qwen/Qwen3-31B"))
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["loc"] == "model"
    assert "Qwen/Qwen3-32B" in problem["suggestions"]
    assert "`architecture`" in problem["detail"] and "POST /v1/models" in problem["detail"]
