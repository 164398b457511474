"""The learned energy regressor behind POST /v1/estimate: energy from the shipped ONNX model,
latency from the roofline corrected by its time head on a vLLM engine it was trained on (not on
sglang), and a start-up refusal for a model that does not match the code."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from api_support import example_body, running_client, services_of
from numpy.testing import assert_allclose

from service.catalog import load_engine_coefficients, load_gpu_catalog, load_model_catalog
from service.catalog.intervals import load_intervals
from service.core.estimate import estimate_request
from service.core.workload import Deployment, Parallelism, Precision, Workload
from service.pricing.regressor.encoding import TIME_OUTPUT_NAME, model_inputs
from service.pricing.regressor.features import Features, request_features
from service.pricing.regressor.runtime import (
    DEFAULT_METADATA_PATH,
    DEFAULT_MODEL_PATH,
    EnergyRegressor,
    RegressorLoadError,
)

pytestmark = pytest.mark.skipif(
    not DEFAULT_MODEL_PATH.is_file(), reason="no learned regressor shipped in models/"
)
RTOL = 1e-9


def test_energy_and_latency_from_the_regressor_over_the_roofline(database_url: str) -> None:
    with running_client(database_url, use_regressor=True) as client:
        response = client.post("/v1/estimate", json=example_body())
        assert response.status_code == 200, response.text
        body = response.json()
        sglang = client.post("/v1/estimate", json=example_body(serving={"engine": "sglang"}))
        assert sglang.status_code == 200, sglang.text
        regressor = services_of(client).estimator.regressor
    assert regressor is not None
    # e.g. "energy-gnn 2026.11.26+roofline 2026.11.7", as in the contract's example
    assert body["model_version"].startswith("energy-gnn ")
    assert body["model_version"].count("energy-gnn") == 1
    assert f"{regressor.version.removeprefix('energy-gnn ')}+roofline " in body["model_version"]
    arch = load_model_catalog().get("meta-llama/Llama-3.1-8B-Instruct").require_architecture()
    deployment = Deployment(
        load_gpu_catalog().get("H100-SXM5-80GB").spec, Parallelism(tensor=2), Precision()
    )
    workload = Workload(8, 512, 256)
    coefficients = load_engine_coefficients()["vllm-v1"]
    analytical = estimate_request(arch, workload, deployment, coefficients)
    features = request_features(arch, workload, deployment, coefficients)
    (predicted,) = regressor.predict(Features.of_requests([features]))
    energy, latency = body["energy"], body["latency"]
    assert_allclose(energy["gpu_j"], predicted.gpu_j, rtol=RTOL)
    # The interval is the evidence level's (family held out here), around the regressor's value.
    interval = load_intervals().interval("family", "energy")
    assert_allclose(energy["gpu_j_low"], predicted.gpu_j * min(interval.lower_ratio, 1), rtol=RTOL)
    assert_allclose(energy["gpu_j_high"], predicted.gpu_j * max(interval.upper_ratio, 1), rtol=RTOL)
    assert_allclose(energy["per_sequence_gpu_j"] * 8, predicted.gpu_j, rtol=RTOL)
    assert_allclose(energy["prefill_gpu_j"] + energy["decode_gpu_j"], predicted.gpu_j, rtol=1e-9)
    # vllm-v1 (the default engine) is in the time head's training rows: decode time x its factor
    inputs = model_inputs(Features.of_requests([features]), regressor.normalisation)
    (log_tpot,) = regressor.session.run([TIME_OUTPUT_NAME], inputs)
    factor = math.exp(float(log_tpot[0, 0]))
    total_s = analytical.prefill.time_s + analytical.decode.time_s * factor
    assert_allclose(latency["total_s"], total_s, rtol=RTOL)
    assert_allclose(
        latency["time_per_output_token_s"], analytical.time_per_output_token_s * factor, rtol=RTOL
    )
    assert energy["gpu_j_low"] <= energy["gpu_j"] <= energy["gpu_j_high"]
    # sglang never was: its latency is the analytical model's
    sglang_analytical = estimate_request(
        arch, workload, deployment, load_engine_coefficients()["sglang"]
    )
    assert_allclose(sglang.json()["latency"]["total_s"], sglang_analytical.total_s, rtol=RTOL)


def test_service_refuses_a_model_whose_feature_spec_differs(
    database_url: str, tmp_path: Path
) -> None:
    metadata = json.loads(DEFAULT_METADATA_PATH.read_text(encoding="utf-8"))
    metadata["feature_spec_sha256"] = "0" * 64
    tampered = tmp_path / "energy_gnn.json"
    tampered.write_text(json.dumps(metadata), encoding="utf-8")
    with (
        pytest.raises(RegressorLoadError, match="feature spec"),
        running_client(database_url, use_regressor=True, onnx_metadata_path=tampered),
    ):
        pass
    assert EnergyRegressor.load().version == metadata["version"]
