"""The activations' default follows the weights served and the GPU's tensor cores: fp8 weights
run W8A8 where fp8 tensor cores exist, nvfp4 W4A4 on Blackwell, both weight-only (said so)
elsewhere; int8 stays weight-only unless `activations: int8` asks for W8A8."""

from __future__ import annotations

from typing import Any

import pytest

from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EstimateRequest


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.from_catalogues()


def _quote(estimator: Estimator, gpu: str, precision: dict[str, str]) -> dict[str, Any]:
    body = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "workload": {"batch_size": 8, "prompt_tokens": 2048, "output_tokens": 64},
        "hardware": {"gpu": gpu, "count": 1},
        "precision": precision,
    }
    priced = estimator.estimate(EstimateRequest.model_validate(body), verbose=True)
    document: dict[str, Any] = priced.document.as_dict()
    return document


def _activations(quote: dict[str, Any]) -> str:
    return str(quote["breakdown"]["defaulted_inputs"]["precision.activations"])


@pytest.mark.parametrize(
    ("gpu", "weights", "activations"),
    [
        ("H100-SXM5-80GB", "fp8", "fp8"),
        ("H100-SXM5-80GB", "int8", "bf16"),
        ("H100-SXM5-80GB", "nvfp4", "bf16"),
        ("B200", "nvfp4", "nvfp4"),
        ("A100-SXM4-80GB", "fp8", "bf16"),
        ("V100-SXM2-32GB", "fp8", "fp16"),
    ],
)
def test_default_activations(
    estimator: Estimator, gpu: str, weights: str, activations: str
) -> None:
    assert _activations(_quote(estimator, gpu, {"weights": weights})) == activations


def test_fp8_and_int8_differ_where_the_hardware_does(estimator: Estimator) -> None:
    h100_fp8 = _quote(estimator, "H100-SXM5-80GB", {"weights": "fp8"})["latency"]
    h100_int8 = _quote(estimator, "H100-SXM5-80GB", {"weights": "int8"})["latency"]
    # same bytes per weight, so decode steps match; fp8 prefill runs on the 8-bit tensor cores
    assert h100_fp8["time_per_output_token_s"] == pytest.approx(
        h100_int8["time_per_output_token_s"], rel=0.02
    )
    assert h100_fp8["prefill_s"] < 0.8 * h100_int8["prefill_s"]
    a100 = _quote(estimator, "A100-SXM4-80GB", {"weights": "fp8"})
    assert any("no fp8 tensor cores" in w for w in a100["warnings"])
    w8a8 = _quote(estimator, "A100-SXM4-80GB", {"weights": "int8", "activations": "int8"})
    assert w8a8["latency"]["prefill_s"] < 0.8 * a100["latency"]["prefill_s"]
