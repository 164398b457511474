"""POST /v1/models, GET and DELETE /v1/models/{id}: a tenant's own model from its config.json,
stored, listed beside the catalogue for that tenant only (404 to others), and priced in its
estimates like a catalogue model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import bearer, create_key, example_body, running_client
from fastapi.testclient import TestClient

_FIXTURE = Path(__file__).resolve().parents[1] / "catalog/fixtures/catalogued_configs.json"
_CONFIGS = json.loads(_FIXTURE.read_text(encoding="utf-8"))["configs"]
QWEN3_30B: dict[str, Any] = _CONFIGS["Qwen/Qwen3-30B-A3B"]["config"]
MODEL_ID = "acme/qwen3-support-ft"
HARDWARE = {"gpu": "H100-SXM5-80GB", "count": 2}


@pytest.fixture(scope="module")
def keys(database_url: str) -> dict[str, str]:
    return {
        "acme_admin": create_key(database_url, "acme", "admin"),
        "acme_gateway": create_key(database_url, "acme", "estimate"),
        "globex_admin": create_key(database_url, "globex", "admin"),
    }


@pytest.fixture(scope="module")
def client(database_url: str, keys: dict[str, str]) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client


def _register(client: TestClient, key: str, model_id: str = MODEL_ID, **extra: Any) -> Any:
    body = {"id": model_id, "config": QWEN3_30B, **extra}
    return client.post("/v1/models", json=body, headers=bearer(key))


def _estimate(client: TestClient, key: str, model: str) -> Any:
    body = example_body(model=model, hardware=HARDWARE)
    return client.post("/v1/estimate", json=body, headers=bearer(key))


def test_a_registered_model_is_quoted_as_its_config(
    client: TestClient, keys: dict[str, str]
) -> None:
    created = _register(client, keys["acme_admin"])
    assert created.status_code == 201, created.text
    model = created.json()
    assert model["id"] == MODEL_ID and model["registered"] is True
    assert model["model_type"] == "qwen3_moe" and model["published_precision"] == "bf16"
    assert model["architecture"]["num_experts"] == 128
    quoted = _estimate(client, keys["acme_gateway"], MODEL_ID)
    catalogued = _estimate(client, keys["acme_gateway"], "Qwen/Qwen3-30B-A3B")
    assert quoted.status_code == catalogued.status_code == 200, quoted.text
    assert quoted.json()["model"] == MODEL_ID
    assert quoted.json()["energy"] == catalogued.json()["energy"]
    assert quoted.json()["latency"] == catalogued.json()["latency"]
    listed = client.get("/v1/models", headers=bearer(keys["acme_gateway"])).json()["items"]
    assert [m["id"] for m in listed if m.get("registered")] == [MODEL_ID]
    one = client.get(f"/v1/models/{MODEL_ID}", headers=bearer(keys["acme_gateway"]))
    assert one.status_code == 200 and one.json()["config"]["num_experts"] == 128


def test_another_tenant_never_sees_it(client: TestClient, keys: dict[str, str]) -> None:
    assert _register(client, keys["acme_admin"], "acme/private-model").status_code == 201
    globex = keys["globex_admin"]
    assert client.get("/v1/models/acme/private-model", headers=bearer(globex)).status_code == 404
    assert client.get("/v1/models/acme/private-model").status_code == 404  # no key at all
    listed = client.get("/v1/models", headers=bearer(globex)).json()["items"]
    assert not [m for m in listed if m.get("registered")]
    assert client.delete("/v1/models/acme/private-model", headers=bearer(globex)).status_code == 404
    refused = client.post(
        "/v1/estimate", json=example_body(model="acme/private-model"), headers=bearer(globex)
    )
    assert refused.status_code == 422 and refused.json()["errors"][0]["loc"] == "model"
    assert "acme/private-model" not in refused.json()["suggestions"]
    # the same id is free for globex to register as its own
    assert _register(client, globex, "acme/private-model").status_code == 201


def test_weights_named_at_registration_set_the_default(
    client: TestClient, keys: dict[str, str]
) -> None:
    created = _register(client, keys["acme_admin"], "acme/qwen3-fp8", weights="fp8")
    assert created.status_code == 201 and created.json()["published_precision"] == "fp8"
    body = example_body(model="acme/qwen3-fp8", hardware=HARDWARE)
    quoted = client.post(
        "/v1/estimate", json=body, headers=bearer(keys["acme_gateway"]), params={"verbose": True}
    )
    assert quoted.json()["breakdown"]["defaulted_inputs"]["precision.weights"] == "fp8"


@pytest.mark.parametrize(
    ("body", "status", "loc"),
    [
        ({"id": "meta-llama/Llama-3.1-8B-Instruct", "config": QWEN3_30B}, 409, None),
        ({"id": "acme/bad", "config": {**QWEN3_30B, "num_experts": "many"}}, 422,
         "config.num_experts"),
        ({"id": "acme/hybrid", "config": {"model_type": "zamba2"}}, 422, "config.model_type"),
        ({"id": "acme/no-type", "config": {"hidden_size": 4096}}, 422, "config.model_type"),
        ({"id": "no-slash", "config": QWEN3_30B}, 422, "id"),
        ({"id": "acme/x", "config": QWEN3_30B, "weights": "fp7"}, 422, "weights"),
    ],
)  # fmt: skip
def test_what_cannot_be_registered(
    client: TestClient, keys: dict[str, str], body: dict[str, Any], status: int, loc: str | None
) -> None:
    response = client.post("/v1/models", json=body, headers=bearer(keys["acme_admin"]))
    assert response.status_code == status, response.text
    if loc is not None:
        assert [e["loc"] for e in response.json()["errors"]] == [loc]


def test_registration_needs_admin_and_is_not_repeated(
    client: TestClient, keys: dict[str, str]
) -> None:
    assert _register(client, keys["acme_gateway"], "acme/by-gateway").status_code == 403
    assert _register(client, keys["acme_admin"], "acme/twice").status_code == 201
    assert _register(client, keys["acme_admin"], "ACME/Twice").status_code == 409


def test_a_deleted_model_is_gone(client: TestClient, keys: dict[str, str]) -> None:
    admin, gateway = keys["acme_admin"], keys["acme_gateway"]
    assert _register(client, admin, "acme/short-lived").status_code == 201
    assert _estimate(client, gateway, "acme/short-lived").status_code == 200
    assert client.delete("/v1/models/acme/short-lived", headers=bearer(admin)).status_code == 204
    assert client.get("/v1/models/acme/short-lived", headers=bearer(admin)).status_code == 404
    gone = _estimate(client, gateway, "acme/short-lived")
    assert gone.status_code == 422 and gone.json()["errors"][0]["loc"] == "model"
    assert client.delete("/v1/models/acme/short-lived", headers=bearer(admin)).status_code == 404
