"""Problem details for HTTP errors, the public catalogues, health and metrics."""

from __future__ import annotations

from typing import Any

from api_support import example_body, running_client, take_database_away
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

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
    assert_problem(400, bad)  # the body is not JSON at all: not a field's 422


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

        test_client.app.state.services.estimator.price = explode  # type: ignore[attr-defined]
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


def scrape(client: TestClient) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """GET /metrics, parsed: (sample name, labels) -> value."""
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_count_requests_latencies_and_estimates(client: TestClient) -> None:
    model = "meta-llama/Llama-3.1-8B-Instruct"
    before = scrape(client)
    for _ in range(3):
        client.post("/v1/estimate", json=example_body(hardware={"gpu": "L40S", "count": 1}))
    client.post("/v1/estimate", json=example_body(hardware={"gpu": "L40S", "count": 65}))
    client.post("/v1/estimate", json=example_body(model="nobody/no-such-model"))  # refused
    quote = client.post("/v1/estimate", json=example_body()).json()
    quote_id = quote["quote_id"]
    client.get(f"/v1/quotes/{quote_id}")
    client.get("/v1/quotes/q_00000000000000000000000000")
    client.get("/v1/no-such-route")
    after = scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    requests = "quotes_http_requests_total"
    assert delta(requests, route="/v1/estimate", method="POST", status="200") == 4
    assert delta(requests, route="/v1/estimate", method="POST", status="422") == 2
    # by route template, not raw path (bounded label cardinality)
    assert delta(requests, route="/v1/quotes/{quote_id}", method="GET", status="200") == 1
    assert delta(requests, route="/v1/quotes/{quote_id}", method="GET", status="404") == 1
    assert delta(requests, route="unmatched", method="GET", status="404") == 1
    assert not any(quote_id in str(labels) for _, labels in after)
    latency = "quotes_http_request_duration_seconds"
    labels = {"route": "/v1/estimate", "method": "POST", "status": "200"}
    assert delta(f"{latency}_count", **labels) == 4
    assert delta(f"{latency}_sum", **labels) > 0
    assert value(after, f"{latency}_bucket", **labels, le="+Inf") == value(
        after, f"{latency}_count", **labels
    )
    estimates = "quotes_estimates_total"
    h100 = {"tenant": "dev", "model": model, "gpu": "H100-SXM5-80GB"}
    assert delta(estimates, tenant="dev", model=model, gpu="L40S") == 3  # not the refused one
    assert delta(estimates, **h100) == 1
    assert delta("quotes_quoted_gpu_joules_total", **h100) == quote["energy"]["gpu_j"]
    assert delta("quotes_quoted_co2e_grams_total", **h100) == quote["carbon"]["total_g"]
    assert delta("quotes_stored_total", tenant="dev", outcome="stored") == 4
    assert delta("quotes_estimates_by_calibration_total", tenant="dev", calibration="none") == 4
    # Refused in pricing (the unknown model); the 65 GPUs were refused by validation before.
    assert delta("quotes_refused_total", tenant="dev", reason="unknown-name") == 1
    assert delta("quotes_pricing_duration_seconds_count") == 5  # the refused one was priced
    assert delta("quotes_storing_duration_seconds_count") == 4


def test_metrics_count_database_errors(database_url: str) -> None:
    with running_client(database_url) as test_client:
        quote_id = test_client.post("/v1/estimate", json=example_body()).json()["quote_id"]
        take_database_away(test_client)
        test_client.post("/v1/estimate", json=example_body())
        test_client.get(f"/v1/quotes/{quote_id}")
        test_client.get("/v1/health")
        samples = scrape(test_client)
    errors = "quotes_db_errors_total"
    assert value(samples, errors, operation="store_quote") == 1
    assert value(samples, errors, operation="request") == 1
    assert value(samples, errors, operation="health") == 1
    requests = "quotes_http_requests_total"
    assert value(samples, requests, route="/v1/quotes/{quote_id}", method="GET", status="503") == 1


EXPECTED_RESPONSES = {
    ("post", "/v1/estimate"): {"200", "401", "403", "409", "413", "422"},
    ("post", "/v1/estimate/batch"): {"200", "401", "403", "413", "422"},
    ("get", "/v1/quotes"): {"200", "401", "403", "422", "503"},
    ("get", "/v1/quotes/{quote_id}"): {"200", "401", "403", "404", "422", "503"},
    ("post", "/v1/quotes/{quote_id}/observations"): {
        "201",
        "401",
        "403",
        "404",
        "409",
        "413",
        "422",
        "503",
    },
    ("get", "/v1/gpus"): {"200"},
    ("get", "/v1/gpus/{gpu_id}"): {"200", "404", "422", "503"},
    ("post", "/v1/gpus"): {"201", "401", "403", "409", "413", "422", "503"},
    ("get", "/v1/models"): {"200"},
    ("get", "/v1/models/{model_id}"): {"200", "404", "422", "503"},
    ("post", "/v1/models"): {"201", "401", "403", "409", "413", "422", "503"},
    ("delete", "/v1/models/{model_id}"): {"204", "401", "403", "404", "422", "503"},
    ("get", "/v1/regions"): {"200"},
    ("get", "/v1/health"): {"200"},
    ("get", "/v1/health/live"): {"200"},
    ("get", "/v1/health/ready"): {"200", "503"},
    ("post", "/v1/calibrations"): {"201", "401", "403", "413", "422", "503"},
    ("get", "/v1/calibrations"): {"200", "401", "403", "422", "503"},
    ("get", "/v1/calibrations/current"): {"200", "401", "403", "404", "503"},
    ("post", "/v1/calibrations/rollback"): {"200", "401", "403", "409", "422", "503"},
    ("get", "/v1/calibrations/{calibration_id}"): {"200", "401", "403", "404", "422", "503"},
    ("post", "/v1/calibrations/{calibration_id}/activate"): {
        "200",
        "401",
        "403",
        "404",
        "422",
        "503",
    },
}


def test_openapi_declares_every_response_as_problem_details(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operations = {
        (method, path): operation
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
    }
    assert set(operations) == set(EXPECTED_RESPONSES)
    for key, operation in operations.items():
        responses = operation["responses"]
        keyed = {"429"} if "401" in EXPECTED_RESPONSES[key] else set()  # rate limited
        # A body that is not JSON (400) or not sent as JSON (415).
        parsed = {"400", "415"} if "requestBody" in operation else set()
        assert set(responses) == EXPECTED_RESPONSES[key] | keyed | parsed | {"default"}, key
        for status, response in responses.items():
            if status == "default" or status >= "400":
                assert list(response["content"]) == ["application/problem+json"], (key, status)
                schema = response["content"]["application/problem+json"]["schema"]
                assert schema["$ref"].endswith("/Problem"), (key, status)
    assert "Retry-After" in operations[("get", "/v1/quotes")]["responses"]["503"]["headers"]


def test_openapi_has_an_example_on_every_schema_and_docs_are_served(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert {"EstimateRequest", "EstimateResponse", "Problem", "QuotePage"} <= set(schemas)
    missing = [name for name, schema in schemas.items() if not schema.get("examples")]
    assert missing == [], f"schemas without an example: {missing}"
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger-ui" in docs.text
    assert client.get("/redoc").status_code == 200


def test_operation_ids_are_the_route_functions_names_and_unique(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    ids = {
        (method, path): op["operationId"]
        for path, ops in paths.items()
        for method, op in ops.items()
    }
    assert len(set(ids.values())) == len(ids)
    assert ids[("post", "/v1/estimate")] == "estimate"
    assert ids[("post", "/v1/estimate/batch")] == "estimate_batch"
    assert ids[("get", "/v1/quotes")] == "list_quotes"
    assert ids[("post", "/v1/quotes/{quote_id}/observations")] == "post_observation"
    assert all(op.isidentifier() and op.islower() for op in ids.values()), ids
