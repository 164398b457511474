"""The feature encoder (one request, and many at once) equals the straightforward encoder the
committed model was trained with, value for value (to 1e-12), over MoE, MLA, sliding windows,
unfused attention, tensor/pipeline/expert parallelism and one output token."""

from __future__ import annotations

import numpy as np
import pytest
from features_reference import reference_features

from service.catalog import load_engine_coefficients, load_gpu_catalog, load_model_catalog
from service.core.dtypes import DType
from service.core.estimate import estimate_request, estimate_workloads
from service.core.workload import Deployment, Parallelism, Precision, Workload
from service.pricing.regressor.features import request_features, workload_features

COEFFICIENTS = load_engine_coefficients()["vllm-v1"]
FP8 = Precision(weights=DType.FP8, activations=DType.FP8, kv_cache=DType.BF16)
CASES = [
    ("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB", Parallelism(), Precision(), True),
    (
        "meta-llama/Llama-3.1-70B-Instruct",
        "A100-SXM4-80GB",
        Parallelism(2, 1, 2),
        Precision(),
        True,
    ),
    (
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "H100-SXM5-80GB",
        Parallelism(tensor=2),
        Precision(),
        False,
    ),
    ("Qwen/Qwen3-30B-A3B", "H100-SXM5-80GB", Parallelism(tensor=1, expert=4), Precision(), True),
    ("deepseek-ai/DeepSeek-V3", "H200-SXM-141GB", Parallelism(tensor=8), FP8, True),
    ("google/gemma-2-9b-it", "L40S", Parallelism(tensor=2), Precision(), True),
    ("openai/gpt-oss-20b", "H100-SXM5-80GB", Parallelism(), Precision(), True),
]
WORKLOADS = [
    Workload(1, 7, 1),
    Workload(8, 512, 256),
    Workload(3, 130, 70),
    Workload(64, 2000, 9),
    Workload(16, 512, 1),
]
TOLERANCE = {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize(("model", "gpu", "parallelism", "precision", "flash"), CASES)
def test_the_encoder_equals_the_training_encoder(
    model: str, gpu: str, parallelism: Parallelism, precision: Precision, flash: bool
) -> None:
    arch = load_model_catalog().get(model).require_architecture()
    dep = Deployment(load_gpu_catalog().get(gpu).spec, parallelism, precision, flash)
    batch, errors = estimate_workloads(arch, WORKLOADS, dep, COEFFICIENTS, check_memory=False)
    assert errors == {}
    many = workload_features(batch)
    for j, workload in enumerate(WORKLOADS):
        estimate = estimate_request(arch, workload, dep, COEFFICIENTS, check_memory=False)
        expected = reference_features(arch, workload, dep, estimate)
        for features in (request_features(arch, workload, dep, COEFFICIENTS), many.item(j)):
            for name, value in expected.items():
                actual = getattr(features, name)
                assert actual.shape == value.shape, name
                np.testing.assert_allclose(actual, value, **TOLERANCE, err_msg=name)
