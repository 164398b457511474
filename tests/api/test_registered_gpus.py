"""GPUs beyond the built-in ones: the new catalogue GPUs quote, `hardware.spec` describes a GPU
inline (the rest filled from the nearest catalogued GPU, with a warning), POST /v1/gpus adds one
for every tenant (operator key; listed by GET /v1/gpus and quoted like a catalogue GPU), and an
unknown id's 422 names near matches and both ways to price it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from api_support import bearer, create_key, example_body, running_client
from fastapi.testclient import TestClient

NEW_GPUS = (
    "B300",
    "GB200",
    "GB300",
    "GH200",
    "MI250",
    "RTX-4090",
    "RTX-PRO-6000",
    "H20",
    "MI325X",
    "Gaudi3",
)
ACME_X = {
    "id": "acme-x1",
    "vendor": "NVIDIA",
    "architecture": "Hopper",
    "memory_bandwidth_bytes_per_s": 6.7e12,  # twice an H100 SXM's 3.35 TB/s
    "tdp_w": 700,
    "sources": {"memory_bandwidth_bytes_per_s": "Acme X1 datasheet - https://example.com/x1"},
}


@pytest.fixture(scope="module")
def keys(database_url: str) -> dict[str, str]:
    return {
        "operator": create_key(database_url, "ops", "operator"),
        "admin": create_key(database_url, "acme", "admin"),
        "gateway": create_key(database_url, "acme", "estimate"),
    }


@pytest.fixture(scope="module")
def client(database_url: str, keys: dict[str, str]) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client


def _estimate(client: TestClient, key: str, hardware: dict[str, Any]) -> Any:
    body = example_body(hardware=hardware)
    return client.post("/v1/estimate", json=body, headers=bearer(key))


def _points(quote: dict[str, Any]) -> list[float]:
    latency = quote["latency"]
    return [latency[k] for k in ("prefill_s", "time_per_output_token_s", "total_s")]


@pytest.mark.parametrize("gpu_id", NEW_GPUS)
def test_each_new_gpu_quotes_llama_8b_at_the_widest_evidence(
    client: TestClient, keys: dict[str, str], gpu_id: str
) -> None:
    response = _estimate(client, keys["gateway"], {"gpu": gpu_id, "count": 1})
    assert response.status_code == 200, response.text
    validation = response.json()["validation"]
    listed = client.get(f"/v1/gpus/{gpu_id}").json()
    # no measurement entered a fit on these GPUs: NVIDIA's are `gpu`, other vendors' `vendor`
    assert validation["gpu"]["fitted_on"] is False
    assert validation["level"] == ("gpu" if listed["vendor"] == "NVIDIA" else "vendor")
    assert listed["validation"]["fitted_on"] is False
    assert listed["interconnect_domain_gpus"] >= 1


def test_an_inline_spec_equal_to_a_catalogued_gpu_quotes_as_that_gpu(
    client: TestClient, keys: dict[str, str]
) -> None:
    # H100 SXM's own bandwidth and TDP: the nearest Hopper is the H100 SXM, every other figure
    # is filled from it, so the latency is the H100's to the digit
    spec = {"id": "my-h100", "vendor": "NVIDIA", "architecture": "Hopper"}
    spec |= {"memory_bandwidth_bytes_per_s": 3.35e12, "tdp_w": 700}
    inline = _estimate(client, keys["gateway"], {"spec": spec, "count": 2})
    catalogued = _estimate(client, keys["gateway"], {"gpu": "H100-SXM5-80GB", "count": 2})
    assert inline.status_code == catalogued.status_code == 200, inline.text
    assert _points(inline.json()) == _points(catalogued.json())
    assert inline.json()["validation"]["level"] == "gpu"
    warning = next(w for w in inline.json()["warnings"] if "hardware.spec" in w)
    assert "taken from H100-SXM5-80GB" in warning and "tensor_dense_flops_per_s" in warning
    assert "memory_bandwidth_bytes_per_s" not in warning  # given, not filled


def test_an_inline_spec_with_faster_memory_decodes_faster(
    client: TestClient, keys: dict[str, str]
) -> None:
    spec = {k: v for k, v in ACME_X.items() if k not in ("sources",)}
    fast = _estimate(client, keys["gateway"], {"spec": spec, "count": 2}).json()
    base = _estimate(client, keys["gateway"], {"gpu": "H100-SXM5-80GB", "count": 2}).json()
    # decode at batch 8 streams the weights: twice the bandwidth, well under the H100's step
    tpot, h100_tpot = (q["latency"]["time_per_output_token_s"] for q in (fast, base))
    assert tpot < 0.8 * h100_tpot
    assert fast["validation"]["level"] == "gpu"  # a GPU no measurement backs


def test_spec_and_gpu_together_are_refused(client: TestClient, keys: dict[str, str]) -> None:
    hardware = {"gpu": "H100-SXM5-80GB", "spec": {"tdp_w": 700}}
    response = _estimate(client, keys["gateway"], hardware)
    assert response.status_code == 422


def test_a_spec_may_not_borrow_a_catalogued_gpus_name(
    client: TestClient, keys: dict[str, str]
) -> None:
    """Its evidence level and calibration would be that GPU's."""
    response = _estimate(client, keys["gateway"], {"spec": {"id": "h100", "tdp_w": 300}})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == "hardware.spec.id"


def test_an_unknown_gpu_names_near_matches_and_both_ways_to_price_it(
    client: TestClient, keys: dict[str, str]
) -> None:
    response = _estimate(client, keys["gateway"], {"gpu": "RTX4090"})
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["loc"] == "hardware.gpu"
    assert "RTX-4090" in problem["suggestions"]
    assert "hardware.spec" in problem["detail"] and "POST /v1/gpus" in problem["detail"]


def test_post_gpu_takes_an_operator_key(client: TestClient, keys: dict[str, str]) -> None:
    refused = client.post("/v1/gpus", json=ACME_X, headers=bearer(keys["admin"]))
    assert refused.status_code == 403, refused.text
    assert client.post("/v1/gpus", json=ACME_X).status_code == 401
    assert _estimate(client, keys["gateway"], {"gpu": "acme-x1"}).status_code == 422


def test_a_registered_gpu_is_listed_and_quoted_for_every_tenant(
    client: TestClient, keys: dict[str, str]
) -> None:
    created = client.post("/v1/gpus", json=ACME_X, headers=bearer(keys["operator"]))
    assert created.status_code == 201, created.text
    gpu = created.json()
    assert gpu["id"] == "acme-x1" and gpu["registered"] is True
    # nearest Hopper by |ln ratio|: 6.7 TB/s is ln(6.7/4.8) = 0.33 from an H200 (700 W too),
    # ln 2 = 0.69 from an H100 SXM
    assert gpu["filled_from"] == "H200-SXM-141GB"
    assert gpu["memory_bytes"] == 141e9
    assert gpu["memory_bandwidth_bytes_per_s"] == 6.7e12
    assert gpu["sources"]["memory_bandwidth_bytes_per_s"].endswith("https://example.com/x1")
    listed = client.get("/v1/gpus").json()["items"]
    assert [g["id"] for g in listed if g.get("registered")] == ["acme-x1"]
    assert client.get("/v1/gpus/ACME-X1").json()["id"] == "acme-x1"
    quoted = _estimate(client, keys["gateway"], {"gpu": "acme-x1", "count": 2})
    inline = {k: v for k, v in ACME_X.items() if k != "sources"}
    described = _estimate(client, keys["gateway"], {"spec": inline, "count": 2})
    assert quoted.status_code == described.status_code == 200, quoted.text
    assert quoted.json()["latency"] == described.json()["latency"]  # same level too
    assert any("POST /v1/gpus" in w for w in quoted.json()["warnings"])
    again = client.post("/v1/gpus", json=ACME_X, headers=bearer(keys["operator"]))
    assert again.status_code == 409
    taken = {**ACME_X, "id": "H100-SXM5-80GB"}
    assert client.post("/v1/gpus", json=taken, headers=bearer(keys["operator"])).status_code == 409


def test_a_fresh_app_on_the_same_database_prices_a_registered_gpu(
    database_url: str, keys: dict[str, str], client: TestClient
) -> None:
    """Another worker learns of it from the database, not from its memory."""
    client.post("/v1/gpus", json={**ACME_X, "id": "acme-x2"}, headers=bearer(keys["operator"]))
    with running_client(database_url) as other:
        response = _estimate(other, keys["gateway"], {"gpu": "acme-x2", "count": 1})
        assert response.status_code == 200, response.text


def test_nvfp4_runs_w4a4_on_blackwell_and_weight_only_on_hopper(
    client: TestClient, keys: dict[str, str]
) -> None:
    model = "nvidia/Llama-3.1-8B-Instruct-NVFP4"  # a variant: its suffix sets the weights
    body = example_body(model=model, hardware={"gpu": "B200", "count": 1})
    blackwell = _verbose(client, keys["gateway"], body)
    assert _defaulted(blackwell)["precision.weights"] == "nvfp4"
    assert _defaulted(blackwell)["precision.activations"] == "nvfp4"
    body["hardware"] = {"gpu": "H100-SXM5-80GB", "count": 1}
    hopper = _verbose(client, keys["gateway"], body)
    assert _defaulted(hopper)["precision.activations"] == "bf16"
    assert any("no fp4 tensor cores" in w for w in hopper["warnings"])


def _verbose(client: TestClient, key: str, body: dict[str, Any]) -> Any:
    response = client.post("/v1/estimate?verbose=true", json=body, headers=bearer(key))
    assert response.status_code == 200, response.text
    return response.json()


def _defaulted(quote: dict[str, Any]) -> dict[str, Any]:
    defaulted: dict[str, Any] = quote["breakdown"]["defaulted_inputs"]
    return defaulted


def test_inline_gpus_share_one_metrics_label(client: TestClient, keys: dict[str, str]) -> None:
    """Callers name inline GPUs freely: the metrics count them under one GPU label."""
    for name in ("caller-named-1", "caller-named-2"):
        spec = {"id": name, "vendor": "NVIDIA", "architecture": "Hopper"}
        assert _estimate(client, keys["gateway"], {"spec": spec}).status_code == 200
    metrics = client.get("/metrics").text
    assert "caller-named" not in metrics
    assert 'gpu="hardware.spec"' in metrics
