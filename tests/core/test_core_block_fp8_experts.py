"""Block-scaled FP8 routed experts timed at the engine's `block_fp8_expert_bytes`.

Mixtral-8x7B marked block-scaled, fp8 weights, one sequence on one H200: a decode step reads
the 2 touched experts of each of 32 layers, 176,160,768 elements each (gate, up and down,
4096 x 14336 x 3). At 1.3 B per element (an engine whose fp8 block-scaled MoE kernel runs at
0.65 of bf16's time): 32 x 2 x 176,160,768 x 1.3 = 14,656,575,897.6 B per step; the 2 B
default is the 16-bit size, 22,548,578,304 B; per-channel fp8 and bf16 weights are untouched.
"""

from __future__ import annotations

from dataclasses import replace

from core_support import BF16, IDEAL, catalog_arch, catalog_gpu, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.dtypes import DType
from service.core.workload import Precision

FP8 = Precision(DType.FP8, DType.FP8, DType.BF16)
EXPERT_KERNELS = {"moe_gate_up", "moe_down"}
FAST = replace(IDEAL, roofline=replace(IDEAL.roofline, block_fp8_expert_bytes=1.3))
MIXTRAL = catalog_arch("mistralai/Mixtral-8x7B-Instruct-v0.1")
BLOCK = replace(MIXTRAL, fp8_block_scaled=True)


def _per_step(arch: ModelArchitecture, precision: Precision, c: CostModelCoefficients) -> float:
    dep = deployment(catalog_gpu("H200-SXM-141GB"), precision=precision)
    decode = estimate(arch, 1, 64, 5, dep, c).decode
    return column_sum(decode, "weight_bytes", EXPERT_KERNELS) / 4


def test_the_engine_kernel_sets_the_bytes_of_block_scaled_experts() -> None:
    assert_allclose(_per_step(BLOCK, FP8, FAST), 14_656_575_897.6)
    assert_allclose(_per_step(BLOCK, FP8, IDEAL), 22_548_578_304)


def test_other_weights_keep_their_size() -> None:
    assert_allclose(_per_step(MIXTRAL, FP8, FAST), 11_274_289_152)  # per-channel fp8: 1 B
    assert_allclose(_per_step(BLOCK, BF16, FAST), 22_548_578_304)  # bf16: 2 B
