"""A quote is priced with its engine's own fitted profile; an unmeasured engine version with
the nearest profile, a warning, and the intervals of an engine never fitted on."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from numpy.testing import assert_allclose

from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import load_engine_coefficients
from service.catalog.intervals import load_intervals
from service.core.estimate import estimate_request
from service.core.workload import Deployment, Parallelism, Precision, Workload
from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EstimateRequest

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
H100 = "H100-SXM5-80GB"


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.from_catalogues()


def quote(estimator: Estimator, serving: dict[str, Any]) -> dict[str, Any]:
    body = {
        "model": LLAMA_8B,
        "workload": {"batch_size": 1, "prompt_tokens": 512, "output_tokens": 128},
        "hardware": {"gpu": H100, "count": 1},
        "serving": serving,
    }
    document: dict[str, Any] = orjson.loads(
        estimator.estimate(EstimateRequest.model_validate(body)).document.text()
    )
    return document


def core_tpot_s(profile: str) -> float:
    """Time per output token of the same request from the core, under `profile`."""
    arch = load_model_catalog().get(LLAMA_8B).require_architecture()
    gpu = load_gpu_catalog().get(H100).spec
    estimate = estimate_request(
        arch,
        Workload(1, 512, 128),
        Deployment(gpu, Parallelism(tensor=1), Precision()),
        load_engine_coefficients()[profile],
    )
    return estimate.time_per_output_token_s


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "vllm"])
def test_a_quote_uses_its_engines_profile(estimator: Estimator, engine: str) -> None:
    document = quote(estimator, {"engine": engine})
    tpot_s = document["latency"]["time_per_output_token_s"]
    assert_allclose(tpot_s, core_tpot_s(engine), rtol=1e-3)  # the document rounds
    assert abs(tpot_s / core_tpot_s("vllm-v1") - 1.0) > 0.01
    assert document["validation"]["engine"]["value"] == engine
    assert not any("no measurements of" in w for w in document["warnings"])


def test_an_unknown_version_takes_the_nearest_profile_and_wider_intervals(
    estimator: Estimator,
) -> None:
    measured = quote(estimator, {"engine": "vllm-v1", "engine_version": "0.11.1"})
    unknown = quote(estimator, {"engine": "vllm-v1", "engine_version": "0.9.2"})
    # Same profile, so the same point estimate ...
    assert unknown["latency"]["time_per_output_token_s"] == pytest.approx(
        measured["latency"]["time_per_output_token_s"]
    )
    assert any("no measurements of vllm-v1 0.9.2" in w for w in unknown["warnings"])
    # ... at the engine level instead of the family one, whose intervals are wider.
    assert measured["validation"]["level"] == "family"
    assert unknown["validation"]["level"] == "engine"
    assert unknown["validation"]["engine"] == {
        "value": "vllm-v1==0.9.2",
        "fitted_on": False,
        "measured_rows": {},
    }

    # Its ratios envelop the engine level's and the measured version's (family) level's.
    levels = load_intervals()
    latency, tpot_s = unknown["latency"], unknown["latency"]["time_per_output_token_s"]
    for quantity, key in (("tpot", "time_per_output_token_s"), ("total", "total_s")):
        engine, family = levels.interval("engine", quantity), levels.interval("family", quantity)
        low = min(engine.lower_ratio, family.lower_ratio, 1.0)
        high = max(engine.upper_ratio, family.upper_ratio, 1.0)
        assert_allclose(latency[f"{key}_low"], low * latency[key], rtol=2e-3)
        assert_allclose(latency[f"{key}_high"], high * latency[key], rtol=2e-3)
    # TPOT: the engine level is low where the family one is high, so the envelope is wider
    # than the measured version's interval.
    assert (
        latency["time_per_output_token_s_low"]
        < measured["latency"]["time_per_output_token_s_low"]
        * tpot_s
        / measured["latency"]["time_per_output_token_s"]
    )


def test_a_version_alone_names_a_vllm_release(estimator: Estimator) -> None:
    document = quote(estimator, {"engine_version": "0.18.0"})
    assert_allclose(document["latency"]["time_per_output_token_s"], core_tpot_s("vllm"), rtol=1e-3)
    assert document["validation"]["engine"]["value"] == "vllm"
