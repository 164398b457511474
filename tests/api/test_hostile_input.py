"""Hostile input: strict types on every writable body, bounded strings, arrays and headers,
malformed JSON answered 400 (never 500), and no mass assignment: ids, tenants, versions and
timestamps sent in a body are refused with 422 and nothing is stored; query parameters the
API does not define (`tenant`) change nothing. Keys are required (tenant `hostile`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from api_support import bearer, count_quotes, create_key, example_body, running_client
from fastapi.testclient import TestClient
from test_bad_input import assert_problem

OBSERVATION = {"gpu_j": 790.0, "measured_with": "nvml", "measured_at": "2026-11-22T10:00:05Z"}


@pytest.fixture(scope="module")
def keys(database_url: str) -> dict[str, str]:
    return {
        "hostile": create_key(database_url, "hostile", "admin"),
        "victim": create_key(database_url, "victim", "admin"),
    }


@pytest.fixture(scope="module")
def client(database_url: str, keys: dict[str, str]) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def quote_id(client: TestClient, keys: dict[str, str]) -> str:
    answer = client.post("/v1/estimate", json=example_body(), headers=bearer(keys["hostile"]))
    assert answer.status_code == 200
    value: str = answer.json()["quote_id"]
    return value


@pytest.mark.parametrize(
    "field",
    [
        {"quote_id": "q_01JDQ8Z3V5Q4XJ8M2W7K9T0ABC"},
        {"tenant": "victim"},
        {"created_at": "2020-01-01T00:00:00Z"},
        {"model_version": "forged 1"},
        {"calibration_id": "c_01JDQ8ZC0G2C3W4X5Y6Z7A8B9C"},
        {"energy": {"gpu_j": 0.0}},
    ],
    ids=lambda f: next(iter(f)),
)
def test_estimates_refuse_server_owned_fields(
    client: TestClient, keys: dict[str, str], database_url: str, field: dict[str, Any]
) -> None:
    before = count_quotes(database_url, tenant="hostile")
    answer = client.post(
        "/v1/estimate", json=example_body(**field), headers=bearer(keys["hostile"])
    )
    assert_problem(answer, 422, next(iter(field)))
    batch = client.post(
        "/v1/estimate/batch",
        json={"items": [example_body(**field)]},
        headers=bearer(keys["hostile"]),
    )
    assert batch.status_code == 200 and batch.json()["items"][0]["status"] == 422
    assert count_quotes(database_url, tenant="hostile") == before
    assert count_quotes(database_url, tenant="victim") == 0


@pytest.mark.parametrize(
    "field",
    [
        {"observation_id": "o_01JDQ8Z9B3R0Y4M1N2P3Q4R5S6"},
        {"quote_id": "q_01JDQ8Z3V5Q4XJ8M2W7K9T0ABC"},
        {"tenant": "victim"},
        {"created_at": "2020-01-01T00:00:00Z"},
    ],
    ids=lambda f: next(iter(f)),
)
def test_observations_refuse_server_owned_fields(
    client: TestClient, keys: dict[str, str], quote_id: str, field: dict[str, Any]
) -> None:
    path = f"/v1/quotes/{quote_id}/observations"
    answer = client.post(path, json={**OBSERVATION, **field}, headers=bearer(keys["hostile"]))
    assert_problem(answer, 422, next(iter(field)))
    stored = client.get(f"/v1/quotes/{quote_id}", headers=bearer(keys["hostile"])).json()
    assert stored["observations"] == []


@pytest.mark.parametrize(
    "field",
    [
        {"calibration_id": "c_01JDQ8ZC0G2C3W4X5Y6Z7A8B9C"},
        {"tenant": "victim"},
        {"created_at": "2020-01-01T00:00:00Z"},
        {"is_current": True},
        {"previous_id": "c_01JDQ8ZC0G2C3W4X5Y6Z7A8B9C"},
        {"model_version": "forged 1"},
        {"segments": []},
    ],
    ids=lambda f: next(iter(f)),
)
def test_calibrations_refuse_server_owned_fields(
    client: TestClient, keys: dict[str, str], field: dict[str, Any]
) -> None:
    answer = client.post("/v1/calibrations", json=field, headers=bearer(keys["hostile"]))
    assert_problem(answer, 422, next(iter(field)))
    rollback = client.post("/v1/calibrations/rollback", json=field, headers=bearer(keys["hostile"]))
    assert_problem(rollback, 422, next(iter(field)))


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"shrinkage_k": "10"}, "shrinkage_k"),
        ({"holdout_fraction": True}, "holdout_fraction"),
        ({"activate": "yes"}, "activate"),
        ({"activate": 1}, "activate"),
        ({"scope": "everyone"}, "scope"),
    ],
)
def test_calibration_settings_are_strict(
    client: TestClient, keys: dict[str, str], body: dict[str, Any], loc: str
) -> None:
    answer = client.post("/v1/calibrations", json=body, headers=bearer(keys["hostile"]))
    assert_problem(answer, 422, loc)


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"gpu_j": "790"}, "gpu_j"),
        ({"gpu_j": True}, "gpu_j"),
        ({"total_s": "3.5"}, "total_s"),
        ({"measured_at": 1795353166}, "measured_at"),  # Unix seconds are not RFC 3339
        ({"measured_at": "1795353166"}, "measured_at"),
        ({"measured_at": "2026-11-22T10:00:05"}, "measured_at"),  # no offset
        ({"measured_with": 7}, "measured_with"),
        ({"measured_with": "n" * 51}, "measured_with"),
    ],
)
def test_observation_types_are_strict(
    client: TestClient, keys: dict[str, str], quote_id: str, change: dict[str, Any], loc: str
) -> None:
    path = f"/v1/quotes/{quote_id}/observations"
    answer = client.post(path, json={**OBSERVATION, **change}, headers=bearer(keys["hostile"]))
    assert_problem(answer, 422, loc)


def test_strings_arrays_and_headers_are_bounded(client: TestClient, keys: dict[str, str]) -> None:
    key = bearer(keys["hostile"])
    cases: list[tuple[dict[str, Any], str]] = [
        (example_body(model="m" * 201), "model"),
        (example_body(hardware={"gpu": "g" * 101}), "hardware.gpu"),
        (example_body(datacenter={"region": "r" * 51}), "datacenter.region"),
        (example_body(metadata={"k" * 65: 1}), "metadata"),
        (example_body(metadata={"": 1}), "metadata"),
        (example_body(metadata={"nested": {"a": 1}}), "metadata.nested"),
        (example_body(workload={"batch_size": 1.5, "prompt_tokens": 1, "output_tokens": 1}), ""),
    ]
    for body, loc in cases:
        assert_problem(client.post("/v1/estimate", json=body, headers=key), 422, loc or None)
    for idempotency_key in ("k" * 201, "has space", "tab\there"):
        headers = {**key, "Idempotency-Key": idempotency_key}
        answer = client.post("/v1/estimate", json=example_body(), headers=headers)
        assert_problem(answer, 422, "header.Idempotency-Key")
    cursor = client.get("/v1/quotes", params={"cursor": "c" * 501}, headers=key)
    assert_problem(cursor, 422, "query.cursor")
    assert_problem(client.get("/v1/quotes", params={"cursor": "a b"}, headers=key), 422)
    for limit in ("1.5", "true", "-1", "0"):
        answer = client.get("/v1/quotes", params={"limit": limit}, headers=key)
        assert_problem(answer, 422, "query.limit")
    assert_problem(client.get("/v1/quotes/" + "q" * 65, headers=key), 422)
    schema = client.get("/openapi.json").json()["components"]["schemas"]["BatchRequest"]
    assert schema["properties"]["items"]["maxItems"] == 1000


def test_malformed_json_is_a_problem_never_500(client: TestClient, keys: dict[str, str]) -> None:
    headers = {**bearer(keys["hostile"]), "content-type": "application/json"}
    for raw in (
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the parser's recursion limit
        b'{"workload": {"batch_size": ' + b"9" * 5000 + b"}}",  # past int's digit limit
        b'{"model": "\xff\xfe"}',  # not UTF-8
    ):
        assert_problem(client.post("/v1/estimate", content=raw, headers=headers), 400)
    # A JSON syntax error is the body's, not a field's: 400, saying where the parser stopped.
    for path in ("/v1/estimate", "/v1/estimate/batch"):
        truncated = client.post(path, content=b'{"model": ', headers=headers)
        problem = assert_problem(truncated, 400)
        assert problem["type"].endswith("/malformed-body")
        assert problem["detail"] == "the body is not valid JSON: Expecting value at character 10"


def test_a_body_not_sent_as_json_is_415(client: TestClient, keys: dict[str, str]) -> None:
    body = json.dumps(example_body()).encode()
    for content_type, named in (
        ("text/plain", "`text/plain` sent"),
        (None, "no Content-Type sent"),
    ):
        headers = bearer(keys["hostile"])
        if content_type:
            headers["content-type"] = content_type
        answer = client.post("/v1/estimate", content=body, headers=headers)
        problem = assert_problem(answer, 415)
        assert named in problem["detail"] and "application/json" in problem["detail"]
    sent_as_json = {**bearer(keys["hostile"]), "content-type": "application/json; charset=utf-8"}
    assert client.post("/v1/estimate", content=body, headers=sent_as_json).status_code == 200


def test_query_parameters_cannot_choose_the_tenant(
    client: TestClient, keys: dict[str, str], quote_id: str
) -> None:
    victim = client.post("/v1/estimate", json=example_body(), headers=bearer(keys["victim"]))
    victim_quote = victim.json()["quote_id"]
    listed = client.get(
        "/v1/quotes", params={"tenant": "victim", "limit": 1000}, headers=bearer(keys["hostile"])
    )
    ids = {item["quote_id"] for item in listed.json()["items"]}
    assert quote_id in ids and victim_quote not in ids
    forged = client.get(
        f"/v1/quotes/{victim_quote}", params={"tenant": "victim"}, headers=bearer(keys["hostile"])
    )
    assert_problem(forged, 404)


def test_405_lists_every_method_of_the_path(client: TestClient) -> None:
    answer = client.request("DELETE", "/v1/calibrations")
    assert_problem(answer, 405)
    assert answer.headers["Allow"] == "GET, POST"
    assert client.request("PUT", "/v1/estimate").headers["Allow"] == "POST"


def test_a_batch_holds_up_to_1000_items(client: TestClient, keys: dict[str, str]) -> None:
    key = bearer(keys["hostile"])
    full = client.post("/v1/estimate/batch", json={"items": [{}] * 1000}, headers=key)
    assert full.status_code == 200 and len(full.json()["items"]) == 1000
    assert {item["status"] for item in full.json()["items"]} == {422}
    over = client.post("/v1/estimate/batch", json={"items": [{}] * 1001}, headers=key)
    assert_problem(over, 422, "items")
