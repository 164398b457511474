"""Numeric formats: storage size per element and the tensor-core rate a GEMM runs at.

Sizes of the quantised weight formats include their scales (per-tensor scales, one number per
matrix, are left out):
- nvfp4: 16 FP4 (E2M1) elements share one FP8 (E4M3) scale -> (16*4 + 8) / 16 = 4.5 bits
  (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference", 2025).
- mxfp4: OCP Microscaling Formats (MX) v1.0 spec, 32 FP4 (E2M1) elements share one 8-bit E8M0
  scale -> (32*4 + 8) / 32 = 4.25 bits per element.
- int4: group-wise weight-only quantisation as served (AWQ, Lin et al. 2024; GPTQ): per group of
  `group_size` (128 by default) weights of one output column, an fp16 scale and a 4-bit zero
  point packed eight to an int32 (vLLM's and AutoAWQ's `scales` / `qzeros` tensors) -> 4 +
  (16 + 4)/128 = 4.15625 bits per element.
- fp8: per-tensor scaled, 8 bits; block-scaled (DeepSeek-V3's format, `weight_block_size`
  [128, 128]) adds one fp32 scale per 128 x 128 block -> 8 + 32/16384 bits.
- int8: per-channel scales (one per output column) are left out like per-tensor ones.
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
    NVFP4 = "nvfp4"


INT4_GROUP_SIZE = 128
"""AWQ's and GPTQ's default group size [weights per scale]."""
FP8_BLOCK_ELEMENTS = 128 * 128
"""Weights per fp32 scale of a block-scaled FP8 checkpoint (weight_block_size [128, 128])."""


def int4_bytes_per_weight(group_size: int = INT4_GROUP_SIZE) -> float:
    """Bytes per int4 weight with its group's fp16 scale and packed 4-bit zero point [B];
    `group_size` 0: one scale per output channel (thousands of weights), counted as none."""
    if group_size <= 0:
        return 4.0 / 8.0
    return (4.0 + (16.0 + 4.0) / group_size) / 8.0


BYTES_PER_ELEMENT: dict[DType, float] = {
    DType.FP32: 4.0,
    DType.BF16: 2.0,
    DType.FP16: 2.0,
    DType.FP8: 1.0,
    DType.INT8: 1.0,
    DType.INT4: int4_bytes_per_weight(),
    DType.MXFP4: (4.0 + 8.0 / 32.0) / 8.0,
    DType.NVFP4: (4.0 + 8.0 / 16.0) / 8.0,
}

# The tensor-core peak (GpuSpec.tensor_dense_flops_per_s key) a GEMM with these activations uses.
_TENSOR_KEY_OF_ACTIVATION: dict[DType, str] = {
    DType.BF16: "bf16",
    DType.FP16: "fp16",
    DType.FP8: "fp8",
    DType.INT8: "int8",
    DType.MXFP4: "fp4",
    DType.NVFP4: "fp4",
}
FP4_FORMATS = frozenset({DType.MXFP4, DType.NVFP4})

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


def weight_bytes_per_element(
    dtype: DType, *, fp8_block_scaled: bool = False, int4_group_size: int = INT4_GROUP_SIZE
) -> float:
    """Storage bytes per weight in `dtype` [B], with the fp32 block scales of a block-scaled
    FP8 checkpoint when `fp8_block_scaled`, and int4's group scales at `int4_group_size`."""
    if fp8_block_scaled and dtype is DType.FP8:
        return BYTES_PER_ELEMENT[dtype] + 4.0 / FP8_BLOCK_ELEMENTS
    if dtype is DType.INT4:
        return int4_bytes_per_weight(int4_group_size)
    return BYTES_PER_ELEMENT[dtype]


def gemm_compute_key(weights: DType, activations: DType) -> str:
    """The tensor-core precision a weight x activation GEMM really runs at.

    Weight-only quantisation (int4, mxfp4, nvfp4, int8 or fp8 weights with 16-bit activations,
    as on GPUs without FP4 tensor cores: Hopper and older) dequantises in the kernel and
    multiplies at the activation precision; fp8 x fp8 and int8 x int8 run on the 8-bit tensor
    cores (a GPU lacking them refuses the precision: an A100 has int8 tensor cores but no
    fp8); mxfp4 x mxfp4 and nvfp4 x nvfp4 on fp4 tensor cores (Blackwell).
    Raises UnsupportedPrecision for combinations no serving kernel runs.
    """
    if activations is DType.FP32:
        return CUDA_CORE_FP32
    if activations in (DType.BF16, DType.FP16):
        return _TENSOR_KEY_OF_ACTIVATION[activations]
    if activations is DType.FP8 and weights in (DType.FP8, DType.INT4, *FP4_FORMATS):
        return "fp8"
    if activations is DType.INT8 and weights in (DType.INT8, DType.INT4):
        return "int8"
    if activations in FP4_FORMATS and weights is activations:
        return "fp4"
    raise UnsupportedPrecision(
        f"activations in {activations.value} with weights in {weights.value} is not a GEMM that "
        "serving kernels run; use bf16/fp16 activations (weight-only quantisation) or match "
        "weights and activations (fp8/fp8, int8/int8, mxfp4/mxfp4, nvfp4/nvfp4)",
        field="precision.activations",
    )
