"""Numeric formats: storage size per element and the tensor-core rate a GEMM runs at.

Sizes of the block-scaled 4-bit formats include their scales:
- mxfp4: OCP Microscaling Formats (MX) v1.0 spec, 32 FP4 (E2M1) elements share one 8-bit E8M0
  scale -> (32*4 + 8) / 32 = 4.25 bits per element.
- int4: group-wise weight-only quantisation as served (AWQ, Lin et al. 2024; GPTQ): groups of
  128 with an fp16 scale and fp16 zero point -> 4 + 32/128 = 4.25 bits per element.
"""

from __future__ import annotations

from enum import StrEnum

from service.core.cost_model_errors import UnsupportedPrecision


class DType(StrEnum):
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    MXFP4 = "mxfp4"


BYTES_PER_ELEMENT: dict[DType, float] = {
    DType.FP32: 4.0,
    DType.BF16: 2.0,
    DType.FP16: 2.0,
    DType.FP8: 1.0,
    DType.INT8: 1.0,
    DType.INT4: 4.25 / 8.0,
    DType.MXFP4: 4.25 / 8.0,
}

# The tensor-core peak (GpuSpec.tensor_dense_flops_per_s key) a GEMM with these activations uses.
_TENSOR_KEY_OF_ACTIVATION: dict[DType, str] = {
    DType.BF16: "bf16",
    DType.FP16: "fp16",
    DType.FP8: "fp8",
    DType.INT8: "int8",
    DType.MXFP4: "fp4",
}

CUDA_CORE_FP32 = "cuda_fp32"
"""Pseudo-key: the GEMM runs on CUDA cores at the FP32 vector rate (plain fp32 matmul, no TF32)."""


def parse_dtype(value: str, *, field: str) -> DType:
    """The DType named by `value` (case-insensitive; 'bfloat16'/'float16'/'float32' accepted)."""
    aliases = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32"}
    name = aliases.get(value.lower(), value.lower())
    try:
        return DType(name)
    except ValueError:
        known = ", ".join(d.value for d in DType)
        raise UnsupportedPrecision(
            f"unknown precision {value!r}; use one of {known}", field=field
        ) from None


def bytes_per_element(dtype: DType) -> float:
    """Storage bytes per element of `dtype`, block scales included."""
    return BYTES_PER_ELEMENT[dtype]


def gemm_compute_key(weights: DType, activations: DType) -> str:
    """The tensor-core precision a weight x activation GEMM really runs at.

    Weight-only quantisation (int4, mxfp4, int8 or fp8 weights with 16-bit activations)
    dequantises in the kernel and multiplies at the activation precision; fp8 x fp8 and
    int8 x int8 run on the 8-bit tensor cores; mxfp4 x mxfp4 on fp4 tensor cores (Blackwell).
    Raises UnsupportedPrecision for combinations no serving kernel runs.
    """
    if activations is DType.FP32:
        return CUDA_CORE_FP32
    if activations in (DType.BF16, DType.FP16):
        return _TENSOR_KEY_OF_ACTIVATION[activations]
    if activations is DType.FP8 and weights in (DType.FP8, DType.MXFP4, DType.INT4):
        return "fp8"
    if activations is DType.INT8 and weights in (DType.INT8, DType.INT4):
        return "int8"
    if activations is DType.MXFP4 and weights is DType.MXFP4:
        return "fp4"
    raise UnsupportedPrecision(
        f"activations in {activations.value} with weights in {weights.value} is not a GEMM that "
        "serving kernels run; use bf16/fp16 activations (weight-only quantisation) or match "
        "weights and activations (fp8/fp8, int8/int8)",
        field="precision.activations",
    )
