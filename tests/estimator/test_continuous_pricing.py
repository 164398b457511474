"""`Estimator.price` of continuous-batch and prefix-cached requests: the fields reach the core,
the learned correction of a continuous quote is the one its static reading gets, and the
measured ML.ENERGY configuration that used to be refused is quoted."""

from __future__ import annotations

import math
from typing import Any

import pytest

from service.core.workload import Workload
from service.errors import InvalidRequest
from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

LLAMA_8B_H100 = {"model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": {"gpu": "H100-SXM5-80GB"}}


@pytest.fixture(scope="module")
def learned() -> Estimator:
    return Estimator.from_catalogues(regressor=EnergyRegressor.load())


@pytest.fixture(scope="module")
def analytical() -> Estimator:
    return Estimator.from_catalogues()


def request(batch: int, prompt: int, output: int, **extra: Any) -> EstimateRequest:
    workload = {"batch_size": batch, "prompt_tokens": prompt, "output_tokens": output}
    serving = {}
    if "concurrent_sequences" in extra:
        serving["concurrent_sequences"] = extra.pop("concurrent_sequences")
    workload.update(extra)
    body: dict[str, Any] = {**LLAMA_8B_H100, "workload": workload}
    if serving:
        body["serving"] = serving
    return EstimateRequest.model_validate(body)


def gpu_j(estimator: Estimator, body: EstimateRequest) -> float:
    return estimator.estimate(body).response.energy.gpu_j


def test_a_continuous_quote_is_corrected_as_its_static_reading_is(
    learned: Estimator, analytical: Estimator
) -> None:
    # 64 running sequences of 512 + 256 tokens fit one H100: the static reading is a batch of
    # 64 priced without waves, as the regressor's training rows were.
    continuous = request(1, 512, 256, concurrent_sequences=64)
    static = request(64, 512, 256)
    factor = gpu_j(learned, static) / gpu_j(analytical, static)
    expected = gpu_j(analytical, continuous) * factor
    assert math.isclose(gpu_j(learned, continuous), expected, rel_tol=1e-9)
    energy = learned.estimate(continuous).response.energy
    assert energy.gpu_j_low < energy.gpu_j < energy.gpu_j_high
    assert math.isclose(energy.prefill_gpu_j + energy.decode_gpu_j, energy.gpu_j, rel_tol=1e-9)


def test_static_and_continuous_requests_priced_together_answer_as_alone(
    learned: Estimator,
) -> None:
    bodies = [
        request(1, 512, 256, concurrent_sequences=64),
        request(8, 512, 256),
        request(2, 300, 20, concurrent_sequences=100, cached_prompt_tokens=200),
    ]
    together = learned.price(bodies)
    for body, result in zip(bodies, together, strict=True):
        assert isinstance(result, PricedRequest)
        alone = learned.estimate(body).response
        assert math.isclose(result.response.energy.gpu_j, alone.energy.gpu_j, rel_tol=1e-5)
        # the time head's factor, like the energy, to the float32 rounding of its inputs
        assert math.isclose(result.response.latency.total_s, alone.latency.total_s, rel_tol=1e-5)


def test_the_measured_511_sequence_row_is_quoted(learned: Estimator) -> None:
    # ML.ENERGY v3: Llama-3.1-8B, 511 running sequences of 690 + 397 tokens on one H100, as
    # shared/data/README.md maps it (one request among them); read as a static batch it is
    # scheduled in two waves and says so.
    joined = learned.estimate(request(1, 690, 397, concurrent_sequences=511)).response
    assert joined.energy.per_sequence_gpu_j > 0
    assert not any("KV cache" in w for w in joined.warnings)  # 511 x 888 tokens fit
    static = learned.estimate(request(511, 690, 397)).response
    assert any("2 waves" in w for w in static.warnings)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (lambda: request(1, 100, 10, cached_prompt_tokens=101), "workload.cached_prompt_tokens"),
        (lambda: request(8, 100, 10, concurrent_sequences=7), "serving.concurrent_sequences"),
    ],
)
def test_out_of_range_inputs_are_refused_naming_the_field(
    learned: Estimator, body: Any, field: str
) -> None:
    (result,) = learned.price([body()])
    assert isinstance(result, InvalidRequest)
    assert [e.loc for e in result.errors] == [field]


def test_the_serving_state_is_listed_among_the_defaulted_inputs_when_omitted(
    learned: Estimator,
) -> None:
    omitted = learned.resolve(request(1, 690, 397)).defaulted
    assert omitted["workload.cached_prompt_tokens"] == 0
    assert omitted["serving.concurrent_sequences"] is None  # a static batch alone
    given = learned.resolve(request(1, 690, 397, cached_prompt_tokens=0, concurrent_sequences=9))
    assert "workload.cached_prompt_tokens" not in given.defaulted
    assert "serving.concurrent_sequences" not in given.defaulted
    assert given.workload == Workload(1, 690, 397, 0, 9)
