"""Every kind of bad input, through HTTP (open dev mode): a problem document naming the field,
no stack trace, and nothing written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from api_support import count_quotes, example_body, running_client
from fastapi.testclient import TestClient
from httpx import Response

OBSERVATION = {"gpu_j": 790.0, "measured_with": "nvml", "measured_at": "2026-11-22T10:00:05Z"}


def assert_problem(response: Response, status: int, loc: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, Any] = response.json()
    assert {"type", "title", "status", "detail"} <= set(problem)
    assert problem["status"] == status
    assert "Traceback" not in response.text and 'File "' not in response.text
    if loc is not None:
        locs = [error["loc"] for error in problem["errors"]]
        assert any(found == loc or found.startswith(loc + ".") for found in locs), locs
    return problem


def with_workload(**fields: Any) -> dict[str, Any]:
    return example_body(
        workload={"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256, **fields}
    )


def with_hardware(**fields: Any) -> dict[str, Any]:
    return example_body(hardware={"gpu": "H100-SXM5-80GB", "count": 2, **fields})


ESTIMATE_CASES: list[tuple[str, dict[str, Any], str]] = [
    # unknown fields, at every depth
    ("unknown top-level field", example_body(colour="blue"), "colour"),
    ("unknown workload field", with_workload(beam_width=4), "workload.beam_width"),
    ("unknown hardware field", with_hardware(nvlink=True), "hardware.nvlink"),
    (
        "unknown parallelism field",
        with_hardware(parallelism={"tensor": 2, "sequence": 1}),
        "hardware.parallelism.sequence",
    ),
    ("unknown datacenter field", example_body(datacenter={"country": "FR"}), "datacenter.country"),
    # strict numbers: no strings, floats or booleans for integers, no strings for floats
    ("string batch size", with_workload(batch_size="8"), "workload.batch_size"),
    ("float batch size", with_workload(batch_size=8.0), "workload.batch_size"),
    ("boolean GPU count", with_hardware(count=True), "hardware.count"),
    ("string PUE", example_body(datacenter={"pue": "1.2"}), "datacenter.pue"),
    ("string flag", example_body(serving={"flash_attention": "yes"}), "serving.flash_attention"),
    # bounds
    ("batch size 0", with_workload(batch_size=0), "workload.batch_size"),
    ("batch size over 4096", with_workload(batch_size=4097), "workload.batch_size"),
    ("no output tokens", with_workload(output_tokens=0), "workload.output_tokens"),
    ("prompt over any context", with_workload(prompt_tokens=1_000_001), "workload.prompt_tokens"),
    (
        "tokens over the model's context",
        with_workload(batch_size=1, prompt_tokens=130_000, output_tokens=2_000),
        "workload.output_tokens",
    ),
    ("GPU count 0", with_hardware(count=0), "hardware.count"),
    ("GPU count over 64", with_hardware(count=65), "hardware.count"),
    ("PUE under 1", example_body(datacenter={"pue": 0.9}), "datacenter.pue"),
    ("PUE over 3", example_body(datacenter={"pue": 3.5}), "datacenter.pue"),
    (
        "negative intensity",
        example_body(datacenter={"carbon_intensity_g_per_kwh": -1.0}),
        "datacenter.carbon_intensity_g_per_kwh",
    ),
    ("too much metadata", example_body(metadata={f"k{i}": i for i in range(33)}), "metadata"),
    ("long metadata value", example_body(metadata={"note": "x" * 501}), "metadata.note"),
    ("unknown precision", example_body(precision={"kv_cache": "fp4"}), "precision.kv_cache"),
    ("unknown engine", example_body(serving={"engine": "tgi"}), "serving.engine"),
    # unknown catalogue names: the field, and near matches
    ("unknown model", example_body(model="meta-llama/Llama-3.1-9B-Instruct"), "model"),
    ("unknown GPU", with_hardware(gpu="A100-SXM4-96GB"), "hardware.gpu"),
    ("unknown region", example_body(datacenter={"region": "US-CAL"}), "datacenter.region"),
    # shape
    (
        "no workload",
        {"model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": {"gpu": "L4"}},
        "workload",
    ),
]


@pytest.mark.parametrize(
    ("body", "loc"), [case[1:] for case in ESTIMATE_CASES], ids=[case[0] for case in ESTIMATE_CASES]
)
def test_bad_estimate_workloads_are_422_naming_the_field(
    client: TestClient, body: dict[str, Any], loc: str
) -> None:
    problem = assert_problem(client.post("/v1/estimate", json=body), 422, loc)
    if problem["type"].endswith("/unknown-name"):
        assert problem["suggestions"], problem


def test_non_finite_numbers_are_refused(client: TestClient) -> None:
    raw = json.dumps(example_body()).replace(
        '"count": 2}', '"count": 2}, "datacenter": {"pue": NaN}'
    )
    response = client.post(
        "/v1/estimate", content=raw, headers={"content-type": "application/json"}
    )
    assert_problem(response, 422, "datacenter.pue")


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b"{not json", "application/json", 400),  # not JSON at all: the body's problem
        (b"[1, 2]", "application/json", 422),  # JSON, but not an object: the fields'
        (b"model=x", "application/x-www-form-urlencoded", 415),  # not sent as JSON
        (b"", "application/json", 422),
    ],
    ids=["broken JSON", "array", "form", "empty"],
)
def test_bodies_that_are_not_a_json_object_are_refused(
    client: TestClient, content: bytes, content_type: str, status: int
) -> None:
    response = client.post("/v1/estimate", content=content, headers={"content-type": content_type})
    assert_problem(response, status)


def test_headers_and_query_parameters_have_bounds(client: TestClient) -> None:
    long_key = {"Idempotency-Key": "k" * 201}
    assert_problem(client.post("/v1/estimate", json=example_body(), headers=long_key), 422)
    assert_problem(client.get("/v1/quotes", params={"limit": 1001}), 422, "query.limit")
    assert_problem(client.get("/v1/quotes", params={"limit": "ten"}), 422, "query.limit")
    assert_problem(client.get("/v1/quotes", params={"format": "xml"}), 422, "query.format")
    assert_problem(client.get("/v1/quotes", params={"created_after": "yesterday"}), 422)
    assert_problem(client.get(f"/v1/quotes/q_{'0' * 70}"), 422, "path.quote_id")


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"gpu_j": 0.0}, "gpu_j"),
        ({"gpu_j": -5.0}, "gpu_j"),
        ({"gpu_j": "790"}, "gpu_j"),
        ({"gpu_j": 1e13}, "gpu_j"),
        ({"total_s": 0.0}, "total_s"),
        ({"measured_with": ""}, "measured_with"),
        ({"measured_at": "2026-11-22T10:00:05"}, "measured_at"),
        ({"joules": 1.0}, "joules"),
    ],
)
def test_bad_observations_are_422(client: TestClient, change: dict[str, Any], loc: str) -> None:
    quote_id = client.post("/v1/estimate", json=example_body()).json()["quote_id"]
    response = client.post(f"/v1/quotes/{quote_id}/observations", json={**OBSERVATION, **change})
    assert_problem(response, 422, loc)
    assert client.get(f"/v1/quotes/{quote_id}").json()["observations"] == []


def test_bad_batches(client: TestClient) -> None:
    assert_problem(client.post("/v1/estimate/batch", json={"items": []}), 422, "items")
    assert_problem(client.post("/v1/estimate/batch", json={"items": [{}] * 1001}), 422, "items")
    extra = {"items": [example_body()], "priority": "high"}
    assert_problem(client.post("/v1/estimate/batch", json=extra), 422, "priority")
    items = [example_body(colour="blue"), with_hardware(count=65), example_body()]
    results = client.post("/v1/estimate/batch", json={"items": items}).json()["items"]
    assert results[0]["status"] == 422 and results[0]["errors"][0]["loc"] == "colour"
    assert results[1]["status"] == 422 and results[1]["errors"][0]["loc"] == "hardware.count"
    assert results[2]["quote_id"]


def test_not_found_and_method_not_allowed(client: TestClient) -> None:
    assert_problem(client.get("/v1/nothing-here"), 404)
    assert_problem(client.get("/v1/quotes/q_00000000000000000000000000"), 404)
    missing = client.post("/v1/quotes/q_00000000000000000000000000/observations", json=OBSERVATION)
    assert_problem(missing, 404)
    assert_problem(client.get("/v1/gpus/H100-SXM9"), 404)
    assert_problem(client.get("/v1/models/meta-llama/Llama-9"), 404)
    assert_problem(client.put("/v1/estimate", json=example_body()), 405)
    assert_problem(client.put("/v1/gpus", json={}), 405)


def test_bodies_over_the_limit_are_413_on_every_write(database_url: str) -> None:
    with running_client(database_url, max_body_bytes=4000) as small:
        quote_id = small.post("/v1/estimate", json=example_body()).json()["quote_id"]
        big = {"items": [example_body(metadata={"note": "x" * 400})] * 10}
        assert_problem(small.post("/v1/estimate/batch", json=big), 413)
        padded = {**OBSERVATION, "measured_with": "y" * 5000}
        assert_problem(small.post(f"/v1/quotes/{quote_id}/observations", json=padded), 413)


def test_refused_requests_write_nothing(client: TestClient, database_url: str) -> None:
    before = count_quotes(database_url, tenant="dev")
    assert_problem(client.post("/v1/estimate", json=with_hardware(count=65)), 422)
    assert_problem(client.post("/v1/estimate", json=example_body(model="nope/nope")), 422)
    assert_problem(client.post("/v1/estimate/batch", json={"items": [example_body()] * 1001}), 422)
    headers = {"Idempotency-Key": "refused"}
    assert_problem(client.post("/v1/estimate", json=example_body(colour=1), headers=headers), 422)
    assert count_quotes(database_url, tenant="dev") == before
