"""The committed model: it loads, matches this code's feature spec and refuses one that does
not, answers for batches of graphs of different sizes, and stays small."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from regressor_support import METADATA_PATH, MODEL_PATH, measurements, request_inputs

from service.catalog import load_engine_coefficients, load_gpu_catalog, load_model_catalog
from service.core.estimate import estimate_contexts, pricing_context
from service.core.workload import Deployment, Parallelism, Precision, Workload
from service.pricing.regressor.encoding import INPUT_NAMES, OUTPUT_NAMES, TIME_OUTPUT_NAME
from service.pricing.regressor.feature_spec import feature_spec, feature_spec_sha256
from service.pricing.regressor.features import (
    Features,
    RequestFeatures,
    request_features,
    workload_features,
)
from service.pricing.regressor.runtime import (
    INFERENCE_SLICE,
    EnergyPrediction,
    EnergyRegressor,
    RegressorLoadError,
)

MAX_MODEL_BYTES = 1_000_000


def predict_one(regressor: EnergyRegressor, features: RequestFeatures) -> EnergyPrediction:
    """The prediction for one request, as a group of one."""
    return regressor.predict(Features.of_requests([features]))[0]


@pytest.fixture(scope="module")
def regressor() -> EnergyRegressor:
    return EnergyRegressor.load(MODEL_PATH, METADATA_PATH, intra_op_threads=1, inter_op_threads=1)


@pytest.fixture(scope="module")
def features() -> list[RequestFeatures]:
    out = []
    for m in measurements():
        inputs = request_inputs(m)
        coefficients = load_engine_coefficients()[inputs.engine]
        out.append(request_features(inputs.arch, inputs.workload, inputs.deployment, coefficients))
    return out


def test_committed_metadata_matches_this_codes_feature_spec() -> None:
    metadata = json.loads(METADATA_PATH.read_text(encoding="utf-8"))
    assert metadata["feature_spec_sha256"] == feature_spec_sha256()
    assert metadata["feature_spec"] == feature_spec()
    assert metadata["inputs"] == list(INPUT_NAMES)
    assert metadata["outputs"] == [*OUTPUT_NAMES, TIME_OUTPUT_NAME]  # a TPOT head
    # applied only on the engines of its training rows: ML.ENERGY v2 and v3's vLLM
    assert metadata["design"]["time_head_engines"] == ["vllm-v0", "vllm-v1"]
    for key in ("version", "normalisation", "interval", "data_sources", "validation"):
        assert metadata[key]


def test_outputs_other_than_the_codes_are_refused(tmp_path: Path) -> None:
    metadata = json.loads(METADATA_PATH.read_text(encoding="utf-8"))
    metadata["outputs"] = [*OUTPUT_NAMES, "log_ttft_correction"]
    tampered = tmp_path / "energy_gnn.json"
    tampered.write_text(json.dumps(metadata), encoding="utf-8")
    with pytest.raises(RegressorLoadError, match="outputs"):
        EnergyRegressor.load(MODEL_PATH, tampered)


def test_a_tampered_feature_spec_hash_is_refused(tmp_path: Path) -> None:
    metadata = json.loads(METADATA_PATH.read_text(encoding="utf-8"))
    metadata["feature_spec_sha256"] = "0" * 64
    tampered = tmp_path / "energy_gnn.json"
    tampered.write_text(json.dumps(metadata), encoding="utf-8")
    with pytest.raises(RegressorLoadError, match="feature spec"):
        EnergyRegressor.load(MODEL_PATH, tampered)


def test_a_spec_that_does_not_hash_to_its_digest_is_refused(tmp_path: Path) -> None:
    metadata = json.loads(METADATA_PATH.read_text(encoding="utf-8"))
    metadata["feature_spec"]["global"] = metadata["feature_spec"]["global"][:-1]
    tampered = tmp_path / "energy_gnn.json"
    tampered.write_text(json.dumps(metadata), encoding="utf-8")
    with pytest.raises(RegressorLoadError):
        EnergyRegressor.load(MODEL_PATH, tampered)


def test_a_model_file_other_than_the_one_described_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "energy_gnn.onnx"
    other.write_bytes(MODEL_PATH.read_bytes() + b"\0")
    with pytest.raises(RegressorLoadError, match="sha256"):
        EnergyRegressor.load(other, METADATA_PATH)


def test_onnx_file_is_small_with_dynamic_batch_and_nodes() -> None:
    assert MODEL_PATH.stat().st_size <= MAX_MODEL_BYTES
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(MODEL_PATH))
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 17
    dims = {i.name: i.type.tensor_type.shape.dim for i in model.graph.input}
    assert dims["node_x"][0].dim_param and dims["node_x"][2].dim_param
    assert dims["adjacency"][3].dim_param


def test_predictions_are_positive_with_an_interval_and_a_phase_split(
    regressor: EnergyRegressor, features: list[RequestFeatures]
) -> None:
    for f in features:
        p = predict_one(regressor, f)
        assert 0 < p.gpu_j_low < p.gpu_j < p.gpu_j_high
        assert p.prefill_gpu_j >= 0 and p.decode_gpu_j >= 0
        assert p.prefill_gpu_j + p.decode_gpu_j == pytest.approx(p.gpu_j)
        assert p.lower_quantile < p.upper_quantile


def test_a_padded_batch_answers_as_single_requests(
    regressor: EnergyRegressor, features: list[RequestFeatures]
) -> None:
    assert len({f.node_x.shape[0] for f in features}) > 1  # graphs of different sizes
    batch = regressor.predict(Features.of_requests(features))
    for f, p in zip(features, batch, strict=True):
        assert p.gpu_j == pytest.approx(predict_one(regressor, f).gpu_j, rel=1e-5)


def test_prediction_stays_near_the_analytical_estimate(
    regressor: EnergyRegressor, features: list[RequestFeatures]
) -> None:
    """A log-correction: within a factor 3 of the roofline either way on ordinary requests."""
    for f in features:
        analytical = float(sum(math.exp(v) for v in f.log_analytical_j))
        assert analytical / 3 < predict_one(regressor, f).gpu_j < 3 * analytical


def test_more_output_tokens_cost_more_energy(regressor: EnergyRegressor) -> None:
    """A property the measurements imply: a longer generation never costs less."""
    for m in measurements():
        inputs = request_inputs(m)
        coefficients = load_engine_coefficients()[inputs.engine]
        w = inputs.workload
        energies = []
        for output_tokens in (w.output_tokens, 2 * w.output_tokens, 4 * w.output_tokens):
            longer = Workload(w.batch_size, w.prompt_tokens, output_tokens)
            f = request_features(inputs.arch, longer, inputs.deployment, coefficients)
            energies.append(predict_one(regressor, f).gpu_j)
        assert energies == sorted(energies), m.model_id


def test_a_batch_larger_than_one_inference_slice_answers_as_single_requests(
    regressor: EnergyRegressor,
) -> None:
    """predict runs big batches INFERENCE_SLICE requests at a time: two contexts of
    different graphs priced in one pass, 2.3 slices in all (the last one partial), each
    request as if alone."""
    coefficients = load_engine_coefficients()["vllm-v1"]
    models = load_model_catalog()
    contexts, singles = [], []
    for model, gpu, tensor, count in (
        ("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB", 1, 90),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "A100-SXM4-80GB", 4, 57),
    ):
        arch = models.get(model).require_architecture()
        deployment = Deployment(
            load_gpu_catalog().get(gpu).spec, Parallelism(tensor=tensor), Precision(), True
        )
        workloads = [Workload(1 + i % 16, 32 + 7 * i, 1 + 3 * i) for i in range(count)]
        contexts.append((pricing_context(arch, deployment, coefficients), workloads))
        singles += [
            predict_one(regressor, request_features(arch, w, deployment, coefficients))
            for w in workloads
        ]
    assert 2 * INFERENCE_SLICE < len(singles) < 3 * INFERENCE_SLICE
    batch, errors = estimate_contexts(contexts)
    assert errors == {}
    batched = regressor.predict(workload_features(batch))
    assert len(batched) == len(singles)
    for b, s in zip(batched, singles, strict=True):
        assert b.gpu_j == pytest.approx(s.gpu_j, rel=1e-5)
        assert b.prefill_gpu_j == pytest.approx(s.prefill_gpu_j, rel=1e-5)
        assert b.tpot_factor == pytest.approx(s.tpot_factor, rel=1e-5)  # the time head's too
    assert regressor.time_head and len({round(b.tpot_factor, 6) for b in batched}) > 1


def test_the_session_keeps_no_memory_pattern_per_input_shape(
    regressor: EnergyRegressor, features: list[RequestFeatures]
) -> None:
    """Every pass has its own input shapes (requests x nodes), and onnxruntime would keep a
    memory pattern, and an arena block for it, per shape seen: the arena of a long-running
    worker then grows with each rarer shape (bench/results/soak.md). Passes of varied sizes
    still answer each request as it is answered alone."""
    assert regressor.session.get_session_options().enable_mem_pattern is False
    alone = [predict_one(regressor, f).gpu_j for f in features[:12]]
    for size in (1, 2, 5, 12):
        together = [p.gpu_j for p in regressor.predict(Features.of_requests(features[:size]))]
        assert together == pytest.approx(alone[:size], rel=1e-5)
