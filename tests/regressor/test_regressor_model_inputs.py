"""The model's input tensors of requests on one graph (its adjacency and readout taken from a
cache, its node tensor unpadded) are those the same requests get when encoded beside requests
on a larger graph (padded, zeroed per graph), on their own nodes; the cached tensors are
read-only and shared by every pass of that graph and size."""

from __future__ import annotations

import numpy as np

from service.catalog import load_engine_coefficients, load_gpu_catalog, load_model_catalog
from service.core.estimate import estimate_contexts, pricing_context
from service.core.workload import Deployment, Parallelism, Precision, Workload
from service.pricing.regressor.encoding import model_inputs
from service.pricing.regressor.features import workload_features
from service.pricing.regressor.runtime import (
    DEFAULT_METADATA_PATH,
    DEFAULT_MODEL_PATH,
    EnergyRegressor,
)

COEFFICIENTS = load_engine_coefficients()["vllm-v1"]
WORKLOADS = [Workload(8, 512, 256), Workload(1, 7, 1)]


def context(model: str, tensor: int) -> object:
    arch = load_model_catalog().get(model).require_architecture()
    gpu = load_gpu_catalog().get("H100-SXM5-80GB").spec
    return pricing_context(
        arch, Deployment(gpu, Parallelism(tensor=tensor), Precision(), True), COEFFICIENTS
    )


def test_one_graph_equals_its_rows_of_a_padded_pass() -> None:
    norm = EnergyRegressor.load(DEFAULT_MODEL_PATH, DEFAULT_METADATA_PATH).normalisation
    small = context("meta-llama/Llama-3.1-8B-Instruct", 1)  # fewer kernels (no collectives)
    large = context("deepseek-ai/DeepSeek-V3", 8)
    alone, _ = estimate_contexts([(small, WORKLOADS)])
    mixed, _ = estimate_contexts([(large, WORKLOADS[:1]), (small, WORKLOADS)])
    one = model_inputs(workload_features(alone), norm)
    padded = model_inputs(workload_features(mixed), norm)
    nodes = one["adjacency"].shape[-1]
    assert padded["adjacency"].shape[-1] > nodes  # the mixed pass is padded
    node_x, adjacency, readout = (
        padded[name][1:] for name in ("node_x", "adjacency", "readout_weight")
    )  # [B, 1, nodes, features], [B, 1, nodes, nodes], [B, 1, 1, nodes]
    np.testing.assert_array_equal(one["node_x"], node_x[:, :, :nodes])
    np.testing.assert_array_equal(one["adjacency"], adjacency[:, :, :nodes, :nodes])
    np.testing.assert_array_equal(one["readout_weight"], readout[..., :nodes])
    for padding in (node_x[:, :, nodes:], adjacency[:, :, nodes:], adjacency[..., nodes:]):
        assert not padding.any()
    assert not readout[..., nodes:].any()
    np.testing.assert_array_equal(one["global_x"], padded["global_x"][1:])
    np.testing.assert_array_equal(one["readout_weight"], np.float32(1.0 / nodes))
    again = model_inputs(workload_features(alone), norm)
    assert again["adjacency"] is one["adjacency"]  # cached per graph and pass size
    assert not one["adjacency"].flags.writeable and not one["readout_weight"].flags.writeable
