"""price_batch prices a model-and-deployment group with the array form of the cost model only
when it has at least MIN_VECTOR_GROUP requests; smaller groups go one by one through the
single-request core, so a batch of mixed deployments costs no more per item than single
estimates. Either way every item answers what `Estimator.estimate` answers alone: a priced
single exactly (same functions, one onnxruntime pass for the whole batch), an array group
to float32 rounding of the regressor's inputs."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

import service.batch_pricing as batch_pricing
from service.batch_pricing import MIN_VECTOR_GROUP, price_batch
from service.errors import ServiceError
from service.estimator import Estimator, PricedRequest
from service.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

LLAMA_8B_H100 = {"model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": {"gpu": "H100-SXM5-80GB"}}
MIXTRAL_A100 = {
    "model": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "hardware": {"gpu": "A100-SXM4-80GB", "count": 4},
}
GEMMA_L40S = {"model": "google/gemma-2-9b-it", "hardware": {"gpu": "L40S", "count": 1}}


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.from_catalogues(regressor=EnergyRegressor.load())


def body(context: dict[str, Any], batch: int, prompt: int, output: int) -> dict[str, Any]:
    workload = {"batch_size": batch, "prompt_tokens": prompt, "output_tokens": output}
    return {**context, "workload": workload}


def mixed_bodies() -> list[dict[str, Any]]:
    """Llama on H100 five times (an array group), Mixtral twice and Gemma once (singles), an
    item too large for its GPU and an unknown GPU (errors in place), interleaved."""
    return [
        body(LLAMA_8B_H100, 1, 100, 20),
        body(MIXTRAL_A100, 8, 900, 300),
        body(LLAMA_8B_H100, 4, 2000, 1),
        body(GEMMA_L40S, 2, 512, 128),
        body(LLAMA_8B_H100, 16, 64, 700),
        body(MIXTRAL_A100, 1, 30, 5),
        body(GEMMA_L40S, 4096, 60000, 60000),  # does not fit in the L40S's memory
        body(LLAMA_8B_H100, 8, 512, 256),
        {**body(LLAMA_8B_H100, 1, 10, 10), "hardware": {"gpu": "H1OO"}},
        body(LLAMA_8B_H100, 2, 3000, 40),
    ]


def energy_and_latency(priced: PricedRequest) -> list[float]:
    document = orjson.loads(priced.document.text())
    energy, latency = document["energy"], document["latency"]
    return [energy["gpu_j"], energy["prefill_gpu_j"], energy["decode_gpu_j"], latency["total_s"]]


def test_only_groups_of_min_vector_group_use_the_array_form(
    estimator: Estimator, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert MIN_VECTOR_GROUP == 3  # the measured crossover this test's mix is built around
    group_sizes: list[int] = []
    array_form = batch_pricing.estimate_requests

    def counted(*args: Any, **kwargs: Any) -> Any:
        group_sizes.append(len(args[1]))
        return array_form(*args, **kwargs)

    monkeypatch.setattr(batch_pricing, "estimate_requests", counted)
    requests = [EstimateRequest.model_validate(b) for b in mixed_bodies()]
    results = price_batch(estimator, requests, verbose=False, calibration=None)
    assert group_sizes == [5]  # Llama on H100; Mixtral (2) and Gemma (2 with the error) alone
    failed = [i for i, result in enumerate(results) if isinstance(result, ServiceError)]
    assert failed == [6, 8]


@pytest.mark.parametrize("verbose", [False, True])
def test_every_item_answers_as_alone(estimator: Estimator, verbose: bool) -> None:
    requests = [EstimateRequest.model_validate(b) for b in mixed_bodies()]
    results = price_batch(estimator, requests, verbose=verbose, calibration=None)
    array_items = {0, 2, 4, 7, 9}
    for index, (request, result) in enumerate(zip(requests, results, strict=True)):
        try:
            alone = estimator.estimate(request, verbose=verbose)
        except ServiceError as error:
            assert isinstance(result, ServiceError)
            assert (type(result), result.detail, result.errors) == (
                type(error),
                error.detail,
                error.errors,
            )
            continue
        assert isinstance(result, PricedRequest)
        assert (result.response.breakdown is not None) == verbose
        if index in array_items:
            for got, expected in zip(
                energy_and_latency(result), energy_and_latency(alone), strict=True
            ):
                assert math.isclose(got, expected, rel_tol=1e-5)
        else:  # the very same computation
            assert energy_and_latency(result) == energy_and_latency(alone)
            assert result.response.model_dump(exclude={"created_at"}) == alone.response.model_dump(
                exclude={"created_at"}
            )


def test_roofline_fallback_for_singles_when_the_regressor_fails(
    estimator: Estimator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regressor that raises leaves every item priced by the roofline, with the note."""
    roofline_only = Estimator.from_catalogues()
    regressor = estimator.regressor
    assert regressor is not None

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("onnxruntime is broken")

    monkeypatch.setattr(regressor, "predict_batches", broken)
    requests = [EstimateRequest.model_validate(b) for b in mixed_bodies()]
    results = price_batch(estimator, requests, verbose=False, calibration=None)
    for request, result in zip(requests, results, strict=True):
        if isinstance(result, ServiceError):
            continue
        expected = roofline_only.estimate(request).response.energy
        assert math.isclose(result.response.energy.gpu_j, expected.gpu_j, rel_tol=1e-9)
        assert any("learned regressor failed" in w for w in result.response.warnings)
