"""The regressor's time head corrects the latency of a quote on an engine it was trained on
(service/pricing/energy.py learned_decode_factor), and only there: time per output token = the
analytical one x exp(head output), decode time with it, total = prefill + decode, their bounds
the evidence level's ratios around the corrected values; on sglang (never in its training rows,
where a held-out engine showed the correction hurts) the latency is the analytical quote's. The
energy is corrected on both, as without a time head. Expected numbers come from the analytical
cost model and the ONNX session run here by hand on the request's features."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from service.catalog import load_engine_coefficients
from service.catalog.intervals import load_intervals
from service.core.estimate import estimate_request
from service.core.workload import Workload
from service.pricing.calibration import (
    PARAMETERS,
    ActiveCalibration,
    Corrections,
    GpuFit,
    HeldOutError,
)
from service.pricing.continuous_energy import static_reading
from service.pricing.estimator import Estimator
from service.pricing.regressor.encoding import TIME_OUTPUT_NAME, model_inputs
from service.pricing.regressor.features import Features, request_features
from service.pricing.regressor.runtime import DEFAULT_MODEL_PATH, EnergyRegressor
from service.pricing.resolve import ResolvedRequest
from service.schemas.estimate_request import EstimateRequest

pytestmark = pytest.mark.skipif(
    not DEFAULT_MODEL_PATH.is_file(), reason="no learned regressor shipped in models/"
)
BODY: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "hardware": {"gpu": "H100-SXM5-80GB", "count": 2},
    "workload": {"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256},
}
RTOL = 1e-9


@pytest.fixture(scope="module")
def regressor() -> EnergyRegressor:
    loaded = EnergyRegressor.load()
    assert loaded.time_head, "the shipped model has a time-per-output-token head"
    return loaded


@pytest.fixture(scope="module")
def learned(regressor: EnergyRegressor) -> Estimator:
    return Estimator.from_catalogues(regressor=regressor)


def quote(estimator: Estimator, body: dict[str, Any]) -> dict[str, Any]:
    priced = estimator.estimate(EstimateRequest.model_validate(body), verbose=True)
    document: dict[str, Any] = json.loads(priced.document.text())
    return document


def resolved(estimator: Estimator, body: dict[str, Any]) -> ResolvedRequest:
    """The request as the service resolves it (architecture, deployment, workload, engine)."""
    return estimator.resolve(EstimateRequest.model_validate(body))


def head_output(regressor: EnergyRegressor, request: ResolvedRequest, workload: Workload) -> float:
    """The time head's output for `workload` in `request`'s deployment, priced with its
    engine's coefficients, from the ONNX session itself."""
    coefficients = load_engine_coefficients()[request.engine]
    features = request_features(request.architecture, workload, request.deployment, coefficients)
    inputs = model_inputs(Features.of_requests([features]), regressor.normalisation)
    (out,) = regressor.session.run([TIME_OUTPUT_NAME], inputs)
    return float(np.asarray(out)[0, 0])


def analytical_latency(request: ResolvedRequest) -> tuple[float, float, float]:
    """Prefill and decode time and time per output token [s] of the cost model alone."""
    coefficients = load_engine_coefficients()[request.engine]
    estimate = estimate_request(
        request.architecture, request.workload, request.deployment, coefficients
    )
    return estimate.prefill.time_s, estimate.decode.time_s, estimate.time_per_output_token_s


def assert_corrected(latency: dict[str, Any], analytical: tuple[float, ...], log_f: float) -> None:
    prefill_s, decode_s, tpot_s = analytical
    factor = math.exp(log_f)
    assert latency["prefill_s"] == pytest.approx(prefill_s, rel=RTOL)
    assert latency["decode_s"] == pytest.approx(decode_s * factor, rel=RTOL)
    assert latency["time_per_output_token_s"] == pytest.approx(tpot_s * factor, rel=RTOL)
    assert latency["total_s"] == pytest.approx(prefill_s + decode_s * factor, rel=RTOL)


def test_vllm_latency_is_corrected_by_the_time_head(
    regressor: EnergyRegressor, learned: Estimator
) -> None:
    """Default engine (vllm-v1, ML.ENERGY v3's vLLM 0.11.1, in the training rows)."""
    request = resolved(learned, BODY)
    assert request.engine == "vllm-v1"
    log_f = head_output(regressor, request, request.workload)
    assert abs(log_f) > 1e-4  # the head moves this quote: the test can tell
    document = quote(learned, BODY)
    latency = document["latency"]
    assert_corrected(latency, analytical_latency(request), log_f)
    # Bounds: the family level's ratios (widened to bracket the value) around the new values.
    tpot = load_intervals().interval("family", "tpot")
    for name in ("time_per_output_token_s", "decode_s"):
        low, high = min(tpot.lower_ratio, 1.0), max(tpot.upper_ratio, 1.0)
        assert latency[f"{name}_low"] == pytest.approx(latency[name] * low, rel=RTOL)
        assert latency[f"{name}_high"] == pytest.approx(latency[name] * high, rel=RTOL)
    total = load_intervals().interval("family", "total")
    low = latency["total_s"] * min(total.lower_ratio, 1.0)
    assert latency["total_s_low"] == pytest.approx(low, rel=RTOL)
    assert any("regressor's time head, trained on vllm-v1" in w for w in document["warnings"])


def test_continuous_vllm_quote_takes_its_static_readings_factor(
    regressor: EnergyRegressor, learned: Estimator
) -> None:
    """vLLM 0.5.4 (profile vllm-v0) joining 64 running sequences: the head's output on the
    static reading (a batch of the 64, memory unchecked) moves the continuous quote's TPOT."""
    serving = {"engine": "vllm", "engine_version": "0.5.4", "concurrent_sequences": 64}
    workload = {"batch_size": 1, "prompt_tokens": 512, "output_tokens": 256}
    body = {**BODY, "serving": serving, "workload": workload}
    request = resolved(learned, body)
    assert (request.engine, request.workload.concurrent_sequences) == ("vllm-v0", 64)
    log_f = head_output(regressor, request, static_reading(request.workload))
    latency = quote(learned, body)["latency"]
    assert_corrected(latency, analytical_latency(request), log_f)


def test_sglang_latency_stays_analytical_and_energy_is_corrected(learned: Estimator) -> None:
    body = {**BODY, "serving": {"engine": "sglang"}}
    document = quote(learned, body)
    plain = quote(Estimator.from_catalogues(regressor=None), body)
    for name in ("prefill_s", "decode_s", "time_per_output_token_s", "total_s", "total_s_high"):
        assert document["latency"][name] == plain["latency"][name]
    assert document["energy"]["gpu_j"] != pytest.approx(plain["energy"]["gpu_j"], rel=1e-6)
    assert any("not sglang" in w for w in document["warnings"])
    assert not any("time head" in w for w in document["warnings"])


@pytest.mark.parametrize("engine", ["vllm-v1", "sglang"])
def test_breakdown_adds_up_with_the_time_correction(learned: Estimator, engine: str) -> None:
    """Per phase the rows sum to the quoted time and energy; the decode correction row holds
    the time head's move (quoted - analytical decode time), the host row the analytical host
    time."""
    body = {**BODY, "serving": {"engine": engine}}
    document = quote(learned, body)
    _, analytical_decode_s, _ = analytical_latency(resolved(learned, body))
    rows = document["breakdown"]["kernels"]
    for phase in ("prefill", "decode"):
        mine = [r for r in rows if r["phase"] == phase]
        assert sum(r["time_s"] for r in mine) == pytest.approx(
            document["latency"][f"{phase}_s"], rel=1e-9
        )
        assert sum(r["gpu_j"] for r in mine) == pytest.approx(
            document["energy"][f"{phase}_gpu_j"], rel=1e-9
        )
    (correction,) = [r for r in rows if r["phase"] == "decode" and r["kind"] == "correction"]
    moved = document["latency"]["decode_s"] - analytical_decode_s
    assert correction["time_s"] == pytest.approx(moved, rel=1e-6, abs=1e-12)
    assert (correction["time_s"] == 0.0) == (engine == "sglang")


def test_a_calibration_refit_replaces_the_time_correction(learned: Estimator) -> None:
    """A refit of the quote's GPU and engine (host time x2) was fitted to the analytical times:
    the calibrated latency is the analytical quote's calibrated one, the head's not stacked."""
    theta = tuple(math.log(2.0) if p == "host_time" else 0.0 for p in PARAMETERS)
    fit = GpuFit("H100-SXM5-80GB", "vllm-v1", 20, 20, theta, HeldOutError(), True, "")
    pooled = Corrections.none(10.0).global_correction
    corrections = Corrections(10.0, pooled, {}, {("H100-SXM5-80GB", "vllm-v1"): fit})
    request = EstimateRequest.model_validate(BODY)
    plain = Estimator.from_catalogues(regressor=None)
    latencies = [
        e.estimate(
            request, calibration=ActiveCalibration("c_1", e.model_version, corrections)
        ).response.latency
        for e in (learned, plain)
    ]
    assert latencies[0] == latencies[1]
    assert latencies[0].total_s > plain.estimate(request).response.latency.total_s
