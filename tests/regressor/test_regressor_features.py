"""The feature builder: one function for training and serving, a stable spec, sane values."""

from __future__ import annotations

import numpy as np
import pytest
from regressor_support import measurements, request_inputs

from offline.fitting.datasets import EnergyMeasurement
from offline.training.dataset import training_row
from service.catalog import load_engine_coefficients
from service.core.estimate import estimate_request, estimate_workloads
from service.core.workload import Workload
from service.pricing.continuous_energy import static_reading
from service.pricing.regressor.feature_spec import (
    GLOBAL_FEATURES,
    NODE_PHASE_FEATURES,
    NODE_STATIC_FEATURES,
    feature_spec,
    feature_spec_sha256,
)
from service.pricing.regressor.features import request_features, workload_features

ROWS = measurements()


@pytest.mark.parametrize("m", ROWS, ids=[m.model_id for m in ROWS])
def test_training_and_serving_encode_a_request_identically(m: EnergyMeasurement) -> None:
    inputs = request_inputs(m)
    coefficients = load_engine_coefficients()[inputs.engine]
    trained_on = training_row(m, inputs, coefficients).features
    # Serving: the estimator encodes a request from the estimates of its group (here, alone);
    # a continuous one (as the rows are mapped) by its static reading, as training does.
    workload = static_reading(inputs.workload)
    estimates, _ = estimate_workloads(
        inputs.arch, [workload], inputs.deployment, coefficients, check_memory=False
    )
    served = workload_features(estimates).item(0)
    recomputed = request_features(inputs.arch, workload, inputs.deployment, coefficients)
    for other in (served, recomputed):
        for name in ("node_x", "adjacency", "global_x", "log_analytical_j"):
            np.testing.assert_array_equal(getattr(trained_on, name), getattr(other, name))


@pytest.mark.parametrize("m", ROWS, ids=[m.model_id for m in ROWS])
def test_features_have_the_spec_shapes_and_are_finite(m: EnergyMeasurement) -> None:
    inputs = request_inputs(m)
    f = request_features(
        inputs.arch, inputs.workload, inputs.deployment, load_engine_coefficients()[inputs.engine]
    )
    nodes = f.node_x.shape[0]
    assert f.node_x.shape == (nodes, len(NODE_STATIC_FEATURES) + 2 * len(NODE_PHASE_FEATURES))
    assert f.adjacency.shape == (nodes, nodes)
    assert f.global_x.shape == (len(GLOBAL_FEATURES),)
    assert f.log_analytical_j.shape == (2,)
    for array in (f.node_x, f.adjacency, f.global_x, f.log_analytical_j):
        assert np.isfinite(array).all()
    # Every node is connected, and mean aggregation averages: rows sum to 1.
    np.testing.assert_allclose(f.adjacency.sum(axis=1), 1.0)
    np.testing.assert_array_equal(f.adjacency > 0, (f.adjacency > 0).T)
    # Kind one-hot: exactly one kind per node.
    kinds = f.node_x[:, : len(NODE_STATIC_FEATURES) - 1]
    np.testing.assert_array_equal(kinds.sum(axis=1), 1.0)


def test_more_output_tokens_means_more_analytical_decode_energy() -> None:
    inputs = request_inputs(ROWS[0])
    coefficients = load_engine_coefficients()[inputs.engine]
    w = static_reading(inputs.workload)  # the reading the regressor encodes
    short = request_features(inputs.arch, w, inputs.deployment, coefficients)
    longer = Workload(w.batch_size, w.prompt_tokens, 2 * w.output_tokens, w.cached_prompt_tokens)
    long = request_features(inputs.arch, longer, inputs.deployment, coefficients)
    assert long.log_analytical_j[1] > short.log_analytical_j[1]
    assert long.log_analytical_j[0] == pytest.approx(short.log_analytical_j[0])


def test_spec_hash_covers_the_feature_names() -> None:
    spec = feature_spec()
    assert feature_spec_sha256(spec) == feature_spec_sha256()
    spec["global"] = [*spec["global"], "one_more"]
    assert feature_spec_sha256(spec) != feature_spec_sha256()


def test_node_features_are_the_kernel_tables_columns() -> None:
    """Spot-check the encoding against the cost model's tables, column by named column."""
    inputs = request_inputs(ROWS[2])  # tensor parallel: network bytes are non-zero
    coefficients = load_engine_coefficients()[inputs.engine]
    estimate = estimate_request(
        inputs.arch, inputs.workload, inputs.deployment, coefficients, check_memory=False
    )
    f = request_features(inputs.arch, inputs.workload, inputs.deployment, coefficients)
    static = len(NODE_STATIC_FEATURES)
    for phase, table in enumerate((estimate.prefill.table, estimate.decode.table)):
        block = f.node_x[:, static + phase * len(NODE_PHASE_FEATURES) :]

        def column(name: str, block: np.ndarray = block) -> np.ndarray:
            return block[:, NODE_PHASE_FEATURES.index(name)]

        totals = np.array(table.totals)
        np.testing.assert_allclose(column("log_executions"), np.log1p(table.executions))
        np.testing.assert_allclose(column("log_network_bytes"), np.log1p(totals[:, 9]))
        np.testing.assert_allclose(column("log_time_us"), np.log1p(1e6 * np.array(table.time_s)))
        np.testing.assert_allclose(column("log_gpu_mj"), np.log1p(1e3 * np.array(table.gpu_j)))
        np.testing.assert_allclose(column("energy_share").sum(), 1.0)
        assert (column("log_network_bytes") > 0).any()
    assert f.node_x[:, NODE_STATIC_FEATURES.index("kind=all_reduce")].sum() >= 2
    assert f.global_x[GLOBAL_FEATURES.index("log_gpu_j")] == pytest.approx(np.log(estimate.gpu_j))
