"""The one pricing function, `Estimator.price`: requests of one context share one cost-model
evaluation and every request one regressor pass, yet each answers what it answers alone (to the
float32 rounding of the regressor's inputs); a request that fails answers its own error in
place; a regressor that fails leaves every request priced by the roofline, with a note."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from service.errors import InvalidRequest, ServiceError, UnknownName
from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

LLAMA_8B_H100 = {"model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": {"gpu": "H100-SXM5-80GB"}}
MIXTRAL_A100 = {
    "model": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "hardware": {"gpu": "A100-SXM4-80GB", "count": 4},
}
GEMMA_L40S = {"model": "google/gemma-2-9b-it", "hardware": {"gpu": "L40S", "count": 1}}
LLAMA_70B_L40S = {"model": "meta-llama/Llama-3.1-70B-Instruct", "hardware": {"gpu": "L40S"}}


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.from_catalogues(regressor=EnergyRegressor.load())


def body(context: dict[str, Any], batch: int, prompt: int, output: int) -> dict[str, Any]:
    workload = {"batch_size": batch, "prompt_tokens": prompt, "output_tokens": output}
    return {**context, "workload": workload}


def mixed_bodies() -> list[dict[str, Any]]:
    """Llama on H100 five times, Mixtral twice, Gemma once, a 70B model whose weights do not
    fit its GPU, and an unknown GPU, interleaved."""
    return [
        body(LLAMA_8B_H100, 1, 100, 20),
        body(MIXTRAL_A100, 8, 900, 300),
        body(LLAMA_8B_H100, 4, 2000, 1),
        body(GEMMA_L40S, 2, 512, 128),
        body(LLAMA_8B_H100, 16, 64, 700),
        body(MIXTRAL_A100, 1, 30, 5),
        body(LLAMA_70B_L40S, 1, 4000, 4000),  # does not fit in the L40S memory
        body(LLAMA_8B_H100, 8, 512, 256),
        {**body(LLAMA_8B_H100, 1, 10, 10), "hardware": {"gpu": "H1OO"}},
        body(LLAMA_8B_H100, 2, 3000, 40),
    ]


def energy_and_latency(priced: PricedRequest) -> list[float]:
    document = orjson.loads(priced.document.text())
    energy, latency = document["energy"], document["latency"]
    return [energy["gpu_j"], energy["prefill_gpu_j"], energy["decode_gpu_j"], latency["total_s"]]


def test_errors_answer_in_place_and_the_others_are_priced(estimator: Estimator) -> None:
    requests = [EstimateRequest.model_validate(b) for b in mixed_bodies()]
    results = estimator.price(requests)
    assert isinstance(results[6], InvalidRequest)
    assert results[6].extra["error"] == "InsufficientMemory"
    assert isinstance(results[8], UnknownName)
    priced = [r for i, r in enumerate(results) if i not in (6, 8)]
    assert all(isinstance(r, PricedRequest) for r in priced)


@pytest.mark.parametrize("verbose", [False, True])
def test_every_request_answers_as_alone(estimator: Estimator, verbose: bool) -> None:
    requests = [EstimateRequest.model_validate(b) for b in mixed_bodies()]
    results = estimator.price(requests, verbose=verbose)
    for request, result in zip(requests, results, strict=True):
        if isinstance(result, ServiceError):
            continue
        alone = estimator.estimate(request, verbose=verbose)
        pairs = zip(energy_and_latency(result), energy_and_latency(alone), strict=True)
        assert all(math.isclose(got, expected, rel_tol=1e-5) for got, expected in pairs)
        if verbose:  # the same kernels, their figures to rounding (summed in another order)
            rows = result.response.breakdown.kernels  # type: ignore[union-attr]
            alone_rows = alone.response.breakdown.kernels  # type: ignore[union-attr]
            assert [(r.phase, r.kernel) for r in rows] == [(r.phase, r.kernel) for r in alone_rows]
            for row, alone_row in zip(rows, alone_rows, strict=True):
                assert row.bound == alone_row.bound
                if row.kind == "correction":  # quoted - analytical: the regressor's rounding
                    phase_j = getattr(alone.response.energy, f"{row.phase}_gpu_j")
                    phase_s = getattr(alone.response.latency, f"{row.phase}_s")
                    assert math.isclose(row.gpu_j, alone_row.gpu_j, abs_tol=1e-5 * phase_j)
                    assert math.isclose(row.time_s, alone_row.time_s, abs_tol=1e-5 * phase_s)
                    continue
                assert math.isclose(row.time_s, alone_row.time_s, rel_tol=1e-9)
                assert math.isclose(row.gpu_j, alone_row.gpu_j, rel_tol=1e-9)
                assert math.isclose(row.memory_bytes, alone_row.memory_bytes, rel_tol=1e-9)


def test_roofline_fallback_when_the_regressor_fails(
    estimator: Estimator, monkeypatch: pytest.MonkeyPatch
) -> None:
    roofline_only = Estimator.from_catalogues()
    regressor = estimator.regressor
    assert regressor is not None

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("onnxruntime is broken")

    monkeypatch.setattr(regressor, "predict", broken)
    requests = [EstimateRequest.model_validate(b) for b in mixed_bodies()]
    results = estimator.price(requests)
    for request, result in zip(requests, results, strict=True):
        if isinstance(result, ServiceError):
            continue
        expected = roofline_only.estimate(request).response.energy
        assert math.isclose(result.response.energy.gpu_j, expected.gpu_j, rel_tol=1e-9)
        assert any("learned regressor failed" in w for w in result.response.warnings)
