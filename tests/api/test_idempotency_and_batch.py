"""Idempotency-Key on POST /v1/estimate, and POST /v1/estimate/batch (open dev mode), through
the client package."""

from __future__ import annotations

import pytest
from api_support import example_body, services_of
from fastapi.testclient import TestClient
from llm_energy_quotes_client import ApiProblem, Conflict, Estimate, InvalidRequest, QuotesClient
from numpy.testing import assert_allclose


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
