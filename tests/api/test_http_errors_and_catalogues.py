"""Problem details for HTTP errors, the public catalogues, health and metrics."""

from __future__ import annotations

from api_support import example_body, running_client
from fastapi.testclient import TestClient

from service.catalog import load_gpu_catalog

FIXED_GPU_IDS = {
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "H100-SXM5-80GB",
    "H100-PCIE-80GB",
    "H200-SXM-141GB",
    "B200",
    "L4",
    "T4",
    "A10G",
    "L40S",
    "V100-SXM2-32GB",
    "MI300X",
}


def assert_problem(response_status: int, response: object) -> None:
    from httpx import Response

    assert isinstance(response, Response)
    assert response.status_code == response_status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert {"type", "title", "status", "detail"} <= set(body)
    assert body["status"] == response_status
    assert "Traceback" not in response.text


def test_unknown_route_405_and_bad_json(client: TestClient) -> None:
    assert_problem(404, client.get("/v1/nothing-here"))
    assert_problem(405, client.delete("/v1/estimate"))
    bad = client.post(
        "/v1/estimate", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_problem(422, bad)


def test_body_over_the_limit_is_413(database_url: str) -> None:
    with running_client(database_url, max_body_bytes=2000) as small:
        body = example_body(
            metadata={
                "note": "x" * 400,
                "more": "y" * 400,
                "m": "z" * 400,
                "n": "w" * 400,
                "o": "v" * 400,
            }
        )
        assert_problem(413, small.post("/v1/estimate", json=body))

        def chunks() -> object:
            yield b'{"model": "' + b"a" * 3000 + b'"}'

        streamed = small.post(
            "/v1/estimate", content=chunks(), headers={"content-type": "application/json"}
        )
        assert_problem(413, streamed)
        assert small.post("/v1/estimate", json=example_body()).status_code == 200


def test_unexpected_errors_are_500_problems_without_traces(database_url: str) -> None:
    with running_client(database_url) as test_client:

        def explode(*_: object, **__: object) -> None:
            raise RuntimeError("secret internals")

        test_client.app.state.services.estimator.estimate = explode  # type: ignore[attr-defined]
        response = test_client.post("/v1/estimate", json=example_body())
        assert_problem(500, response)
        assert "secret internals" not in response.text


def test_gpu_catalogue(client: TestClient) -> None:
    listing = client.get("/v1/gpus").json()
    ids = {gpu["id"] for gpu in listing["items"]}
    assert ids >= FIXED_GPU_IDS
    for gpu in listing["items"]:
        assert gpu["sources"] and gpu["tdp_w"] > gpu["idle_w"] > 0
        assert gpu["embodied_kg_co2e"] > 0
    one = client.get("/v1/gpus/h100-sxm5-80gb").json()
    assert one["id"] == "H100-SXM5-80GB"
    assert one["memory_bytes"] == load_gpu_catalog().get("H100-SXM5-80GB").spec.memory_bytes
    missing = client.get("/v1/gpus/H100-SXM")
    assert_problem(404, missing)
    assert "H100-SXM5-80GB" in missing.json()["suggestions"]


def test_model_catalogue_with_slashes_in_ids(client: TestClient) -> None:
    listing = client.get("/v1/models").json()
    assert any(m["id"] == "meta-llama/Llama-3.1-8B-Instruct" for m in listing["items"])
    one = client.get("/v1/models/meta-llama/Llama-3.1-8B-Instruct")
    assert one.status_code == 200 and one.json()["architecture"]["num_layers"] == 32
    assert_problem(404, client.get("/v1/models/meta-llama/Llama-9"))


def test_regions_are_public_with_sources(client: TestClient) -> None:
    regions = client.get("/v1/regions").json()
    assert regions["default_region"] == "WORLD"
    assert len(regions["items"]) >= 12
    assert all(r["source"].count("http") >= 1 and r["year"] >= 2020 for r in regions["items"])


def test_health_reports_open_dev_mode(client: TestClient) -> None:
    health = client.get("/v1/health").json()
    assert health["status"] == "ok"
    assert health["open_dev_mode"] is True and health["auth_mode"] == "open-dev"
    assert health["database"]["reachable"] is True
    assert health["model_version"].startswith("roofline")
    assert health["calibration_id"] is None


def test_metrics_count_requests_and_estimates(client: TestClient) -> None:
    client.post("/v1/estimate", json=example_body(hardware={"gpu": "L40S", "count": 1}))
    text = client.get("/metrics").text
    assert 'quotes_http_requests_total{method="POST",route="/v1/estimate",status="200"}' in text
    assert 'quotes_estimates_total{gpu="L40S",model="meta-llama/Llama-3.1-8B-Instruct"}' in text
    assert "quotes_http_request_duration_seconds_bucket" in text
    assert "quotes_db_errors_total" in text or "# HELP quotes_db_errors_total" in text


def test_openapi_has_examples(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for name in ("EstimateRequest", "EstimateResponse", "WorkloadIn", "ObservationIn"):
        assert schemas[name].get("examples"), name
