"""Idempotency-Key on POST /v1/estimate, and POST /v1/estimate/batch (open dev mode)."""

from __future__ import annotations

import json
import logging

import pytest
from api_support import count_quotes, example_body, running_client, services_of
from fastapi.testclient import TestClient
from numpy.testing import assert_allclose
from test_bad_input import assert_problem


def test_same_key_same_body_returns_the_same_quote(client: TestClient) -> None:
    headers = {"Idempotency-Key": "retry-1"}
    first = client.post("/v1/estimate", json=example_body(), headers=headers)
    second = client.post("/v1/estimate", json=example_body(), headers=headers)
    assert first.status_code == second.status_code == 200
    assert first.json()["quote_id"] is not None
    assert second.json() == first.json()


def test_same_key_different_body_is_422(client: TestClient) -> None:
    headers = {"Idempotency-Key": "retry-2"}
    assert client.post("/v1/estimate", json=example_body(), headers=headers).status_code == 200
    other = example_body(workload={"batch_size": 1, "prompt_tokens": 10, "output_tokens": 10})
    response = client.post("/v1/estimate", json=other, headers=headers)
    assert response.status_code == 422
    assert response.json()["type"].endswith("idempotency-mismatch")


def test_same_key_in_flight_is_409(client: TestClient) -> None:
    guard = services_of(client).quotes.guard
    with guard.hold("dev", "retry-3"):
        response = client.post(
            "/v1/estimate", json=example_body(), headers={"Idempotency-Key": "retry-3"}
        )
    assert response.status_code == 409
    assert response.headers["content-type"].startswith("application/problem+json")
    after = client.post("/v1/estimate", json=example_body(), headers={"Idempotency-Key": "retry-3"})
    assert after.status_code == 200


def test_batch_prices_good_items_and_reports_bad_ones_in_order(client: TestClient) -> None:
    bad_gpu = example_body(hardware={"gpu": "H1OO"})
    bad_type = example_body(workload={"batch_size": "8", "prompt_tokens": 1, "output_tokens": 1})
    items = [example_body(), bad_gpu, bad_type, example_body(datacenter={"region": "PL"})]
    response = client.post("/v1/estimate/batch", json={"items": items})
    assert response.status_code == 200
    results = response.json()["items"]
    assert len(results) == 4
    single = client.post("/v1/estimate", json=example_body()).json()
    assert_allclose(results[0]["energy"]["gpu_j"], single["energy"]["gpu_j"], rtol=1e-12)
    assert results[0]["quote_id"] != results[3]["quote_id"]
    assert results[1]["status"] == 422 and results[1]["errors"][0]["loc"] == "hardware.gpu"
    assert results[2]["status"] == 422 and results[2]["errors"][0]["loc"] == "workload.batch_size"
    assert results[3]["carbon"]["region"] == "PL"
    stored = client.get(f"/v1/quotes/{results[3]['quote_id']}")
    assert stored.status_code == 200


def test_batch_over_the_limit_is_422(client: TestClient) -> None:
    response = client.post("/v1/estimate/batch", json={"items": [{}] * 1001})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == "items"


def test_invalid_custom_architecture_names_the_field(client: TestClient) -> None:
    body = example_body(
        architecture={
            "hidden_size": 64,
            "num_layers": 2,
            "num_attention_heads": 3,
            "intermediate_size": 64,
            "vocab_size": 100,
        }
    )
    del body["model"]
    problem = client.post("/v1/estimate", json=body).json()
    assert problem["status"] == 422
    assert problem["errors"][0]["loc"] == "architecture.num_attention_heads"


def test_a_verbose_batch_is_capped_at_its_own_item_count(database_url: str) -> None:
    """Verbose answers carry their per-kernel tables (about three times the size): a verbose
    batch past `max_verbose_batch_items` is a 422 naming `items`; the plain batch of the same
    items, and a verbose one within the cap, are priced."""
    with running_client(database_url, max_verbose_batch_items=3) as capped:
        items = [example_body() for _ in range(4)]
        refused = capped.post("/v1/estimate/batch?verbose=true", json={"items": items})
        problem = assert_problem(refused, 422, "items")
        assert "at most 3 items per verbose batch, got 4" in problem["detail"]
        plain = capped.post("/v1/estimate/batch", json={"items": items})
        assert plain.status_code == 200
        assert [item["breakdown"] for item in plain.json()["items"]] == [None] * 4
        within = capped.post("/v1/estimate/batch?verbose=true", json={"items": items[:3]})
        assert within.status_code == 200
        assert all(item["breakdown"] for item in within.json()["items"])


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_in_metadata_are_refused(
    client: TestClient, database_url: str, number: str
) -> None:
    """Python's JSON parser reads these words, which are not JSON; stored, NaN became null."""
    text = json.dumps(example_body(metadata={"score": 0.5})).replace("0.5", number)
    before = count_quotes(database_url, tenant="dev")
    single = client.post("/v1/estimate", content=text, headers={"Content-Type": "application/json"})
    assert_problem(single, 422, "metadata.score")
    batch = client.post(
        "/v1/estimate/batch",
        content='{"items": [' + text + "]}",
        headers={"Content-Type": "application/json"},
    )
    assert batch.status_code == 200
    (item,) = batch.json()["items"]
    assert item["status"] == 422 and item["errors"][0]["loc"].startswith("metadata.score")
    assert count_quotes(database_url, tenant="dev") == before


def test_an_all_invalid_batch_logs_no_error(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Bad items are the caller's: each answers its problem, and nothing is logged as an error
    (no traceback), whether they fail validation, name nothing known, or do not fit."""
    batches = [
        [{"model": "x"}, {}],
        [example_body(model="nope/nope")] * 2,
        [example_body(model="meta-llama/Llama-3.1-70B-Instruct", hardware={"gpu": "T4"})] * 2,
    ]
    with caplog.at_level(logging.WARNING):
        for items in batches:
            answer = client.post("/v1/estimate/batch", json={"items": items})
            assert answer.status_code == 200
            assert [item["status"] for item in answer.json()["items"]] == [422] * len(items)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert not any(r.exc_info for r in caplog.records)
