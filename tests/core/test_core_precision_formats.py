"""Precisions as the hardware runs them: bytes per weight with each format's scales, and the
tensor cores a GEMM of each weight x activation pair runs on (worked by hand from the formats'
layouts; peaks from the GPU catalogue)."""

from __future__ import annotations

import dataclasses

import pytest
from core_support import catalog_arch, catalog_gpu
from numpy.testing import assert_allclose

from service.catalog.hf_config import read_config
from service.catalog.hf_config.precision import published_precision
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import UnsupportedPrecision
from service.core.dtypes import (
    DType,
    gemm_compute_key,
    int4_bytes_per_weight,
    weight_bytes_per_element,
)
from service.core.shards import shard_shapes
from service.core.workload import Deployment, Parallelism, Precision


@pytest.mark.parametrize(
    ("dtype", "bytes_per_weight"),
    [
        (DType.BF16, 2.0),
        (DType.FP8, 1.0),  # per-tensor scale: one number per matrix
        (DType.INT8, 1.0),
        # 16 E2M1 elements (64 bits) + one E4M3 scale (8 bits) = 72 bits / 16 = 4.5 bits
        (DType.NVFP4, 0.5625),
        # 32 E2M1 elements (128 bits) + one E8M0 scale (8 bits) = 136 bits / 32 = 4.25 bits
        (DType.MXFP4, 0.53125),
        # 128 int4 weights (512 bits) + fp16 scale (16) + packed int4 zero (4) = 532 / 128 bits
        (DType.INT4, 532 / 128 / 8),
    ],
)
def test_bytes_per_weight_include_the_scales(dtype: DType, bytes_per_weight: float) -> None:
    assert weight_bytes_per_element(dtype) == pytest.approx(bytes_per_weight, rel=1e-12)


def test_block_scaled_fp8_adds_one_fp32_scale_per_128_by_128_block() -> None:
    # 16,384 bytes of weights + 4 bytes of scale per block
    expected = (128 * 128 + 4) / (128 * 128)
    assert weight_bytes_per_element(DType.FP8, fp8_block_scaled=True) == pytest.approx(expected)
    assert weight_bytes_per_element(DType.BF16, fp8_block_scaled=True) == 2.0


def test_int4_group_size_sets_the_scale_overhead() -> None:
    # group 32: 4 + 20/32 = 4.625 bits; channel-wise (a group of 4096): 4 + 20/4096 bits
    assert int4_bytes_per_weight(32) == pytest.approx(4.625 / 8)
    assert int4_bytes_per_weight(4096) == pytest.approx((4 + 20 / 4096) / 8)


def test_the_three_4_bit_formats_store_different_bytes() -> None:
    arch = catalog_arch("meta-llama/Llama-3.1-8B-Instruct")
    gpu = catalog_gpu("B200")
    sizes = {
        dtype: shard_shapes(arch, Deployment(gpu, Parallelism(), Precision(weights=dtype)))
        for dtype in (DType.INT4, DType.MXFP4, DType.NVFP4)
    }
    bytes_ = {d: s.weight_bytes for d, s in sizes.items()}
    assert bytes_[DType.INT4] < bytes_[DType.MXFP4] < bytes_[DType.NVFP4]
    assert_allclose(bytes_[DType.NVFP4] / bytes_[DType.MXFP4], 4.5 / 4.25)


def test_a_block_scaled_checkpoint_stores_its_scales() -> None:
    arch = catalog_arch("meta-llama/Llama-3.1-8B-Instruct")
    blocked = dataclasses.replace(arch, fp8_block_scaled=True)
    fp8 = Deployment(catalog_gpu("H100-SXM5-80GB"), Parallelism(), Precision(weights=DType.FP8))
    assert shard_shapes(arch, fp8).weight_bytes == 1.0
    assert shard_shapes(blocked, fp8).weight_bytes == pytest.approx(1 + 4 / 16384)


def test_nvfp4_runs_on_fp4_tensor_cores_or_weight_only() -> None:
    assert gemm_compute_key(DType.NVFP4, DType.NVFP4) == "fp4"  # W4A4 on Blackwell
    assert gemm_compute_key(DType.NVFP4, DType.BF16) == "bf16"  # dequantised (Hopper, older)
    assert catalog_gpu("B200").gemm_peak_flops_per_s("fp4") == pytest.approx(9e15)
    with pytest.raises(UnsupportedPrecision):
        catalog_gpu("H100-SXM5-80GB").gemm_peak_flops_per_s("fp4")
    with pytest.raises(UnsupportedPrecision):
        gemm_compute_key(DType.MXFP4, DType.NVFP4)  # no kernel mixes the two block formats


def test_int8_and_fp8_differ_where_the_hardware_does() -> None:
    a100, h100 = catalog_gpu("A100-SXM4-80GB"), catalog_gpu("H100-SXM5-80GB")
    w8a8_int8 = gemm_compute_key(DType.INT8, DType.INT8)
    w8a8_fp8 = gemm_compute_key(DType.FP8, DType.FP8)
    # A100: 624 TOPS int8 tensor cores (twice its 312 TFLOPS bf16), and no fp8 at all
    assert a100.gemm_peak_flops_per_s(w8a8_int8) == pytest.approx(624e12)
    with pytest.raises(UnsupportedPrecision):
        a100.gemm_peak_flops_per_s(w8a8_fp8)
    # H100: the two 8-bit formats share the 1,979 TFLOPS tensor-core rate
    assert h100.gemm_peak_flops_per_s(w8a8_int8) == h100.gemm_peak_flops_per_s(w8a8_fp8)


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ({"type": "float", "num_bits": 4, "group_size": 16}, DType.NVFP4),
        ({"type": "float", "num_bits": 4, "group_size": 32}, DType.MXFP4),
        ({"type": "int", "num_bits": 4, "group_size": 128}, DType.INT4),
    ],
)
def test_compressed_tensors_4_bit_schemes_are_told_apart(
    weights: dict[str, object], expected: DType
) -> None:
    config = {
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"weights": weights}},
        }
    }
    view = ConfigView(config)
    assert published_precision(view, view).weights is expected


def test_modelopt_nvfp4_is_nvfp4() -> None:
    view = ConfigView({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}})
    assert published_precision(view, view).weights is DType.NVFP4


@pytest.mark.parametrize(
    ("quantization", "group_size", "bits_per_weight"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, 128, 4 + 20 / 128),
        ({"quant_method": "gptq", "bits": 4, "group_size": 32}, 32, 4 + 20 / 32),
        ({"quant_method": "gptq", "bits": 4, "group_size": -1}, 0, 4.0),  # per output channel
        ({"quant_method": "awq", "bits": 4}, 128, 4 + 20 / 128),  # AutoAWQ's default
    ],
)
def test_an_int4_checkpoints_group_size_sets_its_bytes(
    quantization: dict[str, object], group_size: int, bits_per_weight: float
) -> None:
    view = ConfigView({"quantization_config": quantization})
    published = published_precision(view, view)
    assert published.weights is DType.INT4 and published.int4_group_size == group_size
    arch = dataclasses.replace(
        catalog_arch("meta-llama/Llama-3.1-8B-Instruct"), int4_group_size=group_size
    )
    int4 = Deployment(catalog_gpu("H100-SXM5-80GB"), Parallelism(), Precision(weights=DType.INT4))
    assert shard_shapes(arch, int4).weight_bytes == pytest.approx(bits_per_weight / 8)


def test_a_config_json_carries_its_int4_group_size_into_the_architecture() -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "float16",
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32},
    }
    read = read_config(config)
    assert read.published_precision is DType.INT4
    assert read.architecture.int4_group_size == 32
