"""Disaggregated requests in the one pricing function: in a list with others they answer as
alone; the learned regressor leaves them to the analytical energy and says so."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from service.errors import InvalidRequest
from service.pricing.disaggregated import ANALYTICAL_NOTE
from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

BASE: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "workload": {"batch_size": 1, "prompt_tokens": 1000, "output_tokens": 200},
    "hardware": {"gpu": "H100-SXM5-80GB", "count": 1},
    "serving": {"concurrent_sequences": 32},
}


def split(prefill: dict[str, Any]) -> EstimateRequest:
    body = copy.deepcopy(BASE)
    body["serving"]["disaggregated"] = {"prefill": prefill}
    return EstimateRequest.model_validate(body)


def test_disaggregated_and_aggregated_requests_priced_together_answer_as_alone() -> None:
    estimator = Estimator.from_catalogues()
    requests = [
        EstimateRequest.model_validate(BASE),
        split({"count": 1}),
        split({"count": 3}),  # Llama's 32 heads do not split over 3: refused alone
        split({"count": 4, "batch_size": 2}),
    ]
    together = estimator.price(requests)
    for request, answer in zip(requests, together, strict=True):
        (alone,) = estimator.price([request])
        if isinstance(alone, InvalidRequest):
            assert isinstance(answer, InvalidRequest)
            continue
        assert isinstance(answer, PricedRequest) and isinstance(alone, PricedRequest)
        assert answer.response.energy.gpu_j == pytest.approx(alone.response.energy.gpu_j)
        assert answer.response.latency.prefill_s == pytest.approx(alone.response.latency.prefill_s)
    assert isinstance(together[2], InvalidRequest)


def test_the_regressor_leaves_disaggregated_energy_to_the_roofline() -> None:
    learned = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    analytical = Estimator.from_catalogues()
    request = split({"count": 1})
    quote = learned.estimate(request).response
    assert quote.energy.gpu_j == pytest.approx(analytical.estimate(request).response.energy.gpu_j)
    assert ANALYTICAL_NOTE in quote.warnings
