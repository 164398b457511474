"""Every supported catalogue model, and every catalogue GPU, can be priced."""

from __future__ import annotations

import math

import pytest
from core_support import REALISTIC, catalog_arch, deployment, estimate

from service.catalog import GpuRecord, load_gpu_catalog, load_model_catalog
from service.core.architecture import ModelArchitecture
from service.core.cost_model_errors import InsufficientMemory, InvalidParallelism
from service.core.dtypes import DType
from service.core.hardware import GpuSpec
from service.core.results import RequestEstimate
from service.core.workload import Precision

SUPPORTED = [r.id for r in load_model_catalog().records if r.architecture is not None]
H100 = load_gpu_catalog().get("H100-SXM5-80GB").spec


def smallest_fitting(
    arch: ModelArchitecture, gpu: GpuSpec, precision: Precision
) -> RequestEstimate | None:
    """Batch 1, prompt 128, output 16 on the fewest GPUs (a power of two up to 64) that hold it:
    all tensor-parallel if the heads allow, else tensor x pipeline."""
    for count in (2**k for k in range(7)):
        for tensor in (2**k for k in range(int(math.log2(count)), -1, -1)):
            dep = deployment(gpu, tensor=tensor, pipeline=count // tensor, precision=precision)
            try:
                return estimate(arch, 1, 128, 16, dep, REALISTIC)
            except (InvalidParallelism, InsufficientMemory):
                continue
    return None


@pytest.mark.parametrize("model_id", SUPPORTED)
def test_every_supported_model_estimates(model_id: str) -> None:
    result = smallest_fitting(catalog_arch(model_id), H100, Precision())
    if result is None:
        pytest.skip(f"{model_id} needs more than 64 H100s in bf16")
    assert result.gpu_j > 0 and math.isfinite(result.gpu_j)
    assert result.total_s > 0 and math.isfinite(result.total_s)
    assert result.decode.steps == 15


@pytest.mark.parametrize("gpu", load_gpu_catalog().records, ids=lambda r: r.id)
def test_every_gpu_runs_llama_8b(gpu: GpuRecord) -> None:
    spec = gpu.spec
    dtype = DType.FP16 if "fp16" in spec.tensor_dense_flops_per_s else DType.BF16
    precision = Precision(weights=dtype, activations=dtype, kv_cache=dtype)
    result = smallest_fitting(catalog_arch("meta-llama/Llama-3.1-8B-Instruct"), spec, precision)
    assert result is not None
    # 32·218,103,808 + 2·128256·4096 = 8,029,995,008 parameters · 2 B = 16.06 GB:
    # one GPU of 24 GB or more, two 16 GB T4s
    assert result.gpu_count == (2 if spec.memory_bytes < 17e9 else 1)
    assert result.gpu_j > 0 and result.total_s > 0
