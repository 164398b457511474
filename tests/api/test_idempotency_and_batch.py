"""Idempotency-Key on POST /v1/estimate, and POST /v1/estimate/batch (open dev mode), through
the client package."""

from __future__ import annotations

import json
import logging

import pytest
from api_support import count_quotes, example_body, running_client, services_of
from fastapi.testclient import TestClient
from llm_energy_quotes_client import ApiProblem, Conflict, Estimate, InvalidRequest, QuotesClient
from numpy.testing import assert_allclose
from sqlalchemy import create_engine, select
from test_bad_input import assert_problem

from service.db.tables import Quote
from service.quotes.service import request_fingerprint
from service.schemas.estimate_request import EstimateRequest


def test_same_key_same_body_returns_the_same_quote(quotes: QuotesClient) -> None:
    first = quotes.estimate(example_body(), idempotency_key="retry-1")
    second = quotes.estimate(example_body(), idempotency_key="retry-1")
    assert first.quote_id is not None
    assert second == first


def test_same_key_different_body_is_422(quotes: QuotesClient) -> None:
    quotes.estimate(example_body(), idempotency_key="retry-2")
    other = example_body(workload={"batch_size": 1, "prompt_tokens": 10, "output_tokens": 10})
    with pytest.raises(InvalidRequest) as raised:
        quotes.estimate(other, idempotency_key="retry-2")
    assert raised.value.status == 422
    assert raised.value.type.endswith("idempotency-mismatch")


def test_only_a_keyed_quote_stores_its_request_fingerprint(
    database_url: str, quotes: QuotesClient
) -> None:
    """The fingerprint is compared only when a key comes again: a quote without a key stores
    none; a keyed quote stores the fingerprint its key's retries are compared with (pinned by
    hand in test_request_fingerprint_compatibility.py)."""
    keyless = quotes.estimate(example_body(datacenter={"region": "FR"}))
    keyed = quotes.estimate(example_body(datacenter={"region": "FR"}), idempotency_key="retry-4")
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            hashes = dict(
                connection.execute(
                    select(Quote.id, Quote.request_hash).where(
                        Quote.id.in_([keyless.quote_id, keyed.quote_id])
                    )
                ).all()
            )
    finally:
        engine.dispose()
    request = EstimateRequest.model_validate(example_body(datacenter={"region": "FR"}))
    assert hashes == {keyless.quote_id: None, keyed.quote_id: request_fingerprint(request, False)}
    assert quotes.estimate(
        example_body(datacenter={"region": "FR"}), idempotency_key="retry-4"
    ) == (keyed)


def test_same_key_in_flight_is_409(client: TestClient, quotes: QuotesClient) -> None:
    guard = services_of(client).quotes.guard
    with guard.hold("dev", "retry-3"), pytest.raises(Conflict) as raised:
        quotes.estimate(example_body(), idempotency_key="retry-3")
    assert raised.value.status == 409
    assert raised.value.headers["content-type"].startswith("application/problem+json")
    assert quotes.estimate(example_body(), idempotency_key="retry-3").quote_id is not None


def test_batch_prices_good_items_and_reports_bad_ones_in_order(quotes: QuotesClient) -> None:
    bad_gpu = example_body(hardware={"gpu": "H1OO"})
    bad_type = example_body(workload={"batch_size": "8", "prompt_tokens": 1, "output_tokens": 1})
    items = [example_body(), bad_gpu, bad_type, example_body(datacenter={"region": "PL"})]
    results = quotes.estimate_batch(items)
    assert len(results) == 4
    first, gpu_problem, type_problem, polish = results
    assert isinstance(first, Estimate) and isinstance(polish, Estimate)
    single = quotes.estimate(example_body())
    assert_allclose(first.energy.gpu_j, single.energy.gpu_j, rtol=1e-12)
    assert first.quote_id != polish.quote_id
    assert isinstance(gpu_problem, InvalidRequest) and gpu_problem.errors[0].loc == "hardware.gpu"
    assert "suggestions" in gpu_problem.extra  # the problem type's own member, kept
    assert isinstance(type_problem, ApiProblem) and type_problem.status == 422
    assert type_problem.errors[0].loc == "workload.batch_size"
    assert polish.carbon.region == "PL"
    assert polish.quote_id is not None
    assert quotes.quote(polish.quote_id).response["carbon"]["region"] == "PL"


def test_batch_over_the_limit_is_422(quotes: QuotesClient) -> None:
    with pytest.raises(InvalidRequest) as raised:
        quotes.estimate_batch([{}] * 1001)
    assert raised.value.errors[0].loc == "items"


def test_invalid_custom_architecture_names_the_field(quotes: QuotesClient) -> None:
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
    with pytest.raises(InvalidRequest) as raised:
        quotes.estimate(body)
    assert raised.value.errors[0].loc == "architecture.num_attention_heads"


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
