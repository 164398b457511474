"""Seed 002: a small-M o_proj GEMM on an A100 is memory-bound at ~11.4 µs; tile padding."""

from __future__ import annotations

import dataclasses

from core_support import A100_1_5TB, FP16, IDEAL, deployment, estimate, row
from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture
from service.core.results import Bound, RequestEstimate

# o_proj of a model whose 8 heads of 128 give a query width K = 1024 and hidden size N = 8192
ARCH = ModelArchitecture(
    hidden_size=8192,
    num_layers=1,
    num_attention_heads=8,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=8192,
    vocab_size=1000,
)
FLOPS = 268_435_456  # 2·M·N·K = 2·16·8192·1024
BYTES = 17_072_128  # fp16: weights 8192·1024·2 = 16,777,216 + input 16·1024·2 = 32,768
#                     + output 16·8192·2 = 262,144


def o_proj_prefill(tile_m: int) -> RequestEstimate:
    """Prefill of one 16-token sequence (M = 16 rows) in fp16."""
    roofline = dataclasses.replace(IDEAL.roofline, gemm_tile_m=tile_m)
    coefficients = dataclasses.replace(IDEAL, roofline=roofline)
    return estimate(ARCH, 1, 16, 1, deployment(A100_1_5TB, precision=FP16), coefficients)


def test_small_m_gemm_is_memory_bound() -> None:
    o_proj = row(o_proj_prefill(1).prefill, "o_proj")
    assert o_proj.tensor_flops == FLOPS
    assert o_proj.memory_bytes == BYTES
    # intensity 268,435,456 / 17,072,128 ≈ 15.72 FLOP/B, below the ridge 312e12 / 1.5e12 = 208
    assert_allclose(o_proj.arithmetic_intensity_flops_per_byte, 15.7236, rtol=1e-4)
    assert_allclose(o_proj.ridge_point_flops_per_byte, 208.0, rtol=1e-12)
    assert o_proj.bound is Bound.MEMORY
    # 17,072,128 B / 1.5e12 B/s = 11.381 µs (compute would take 268e6 / 312e12 = 0.86 µs)
    assert_allclose(o_proj.time_s, 11.381419e-6, rtol=1e-6)


def test_tile_padding_scales_compute_time_not_bytes() -> None:
    table = o_proj_prefill(64).prefill.table
    i = [node.name for node in table.nodes].index("o_proj")
    assert table.column("tensor_flops")[i] == FLOPS
    # 16 rows padded to a 64-row tile: 4 x 268,435,456 = 1,073,741,824
    assert table.column("padded_tensor_flops")[i] == 1_073_741_824
    assert table.memory_bytes[i] == BYTES
    # 1,073,741,824 / 312e12 = 3.4415 µs of tensor time, still under the 11.38 µs of memory
    assert_allclose(table.compute_s[i], 3.441480e-6, rtol=1e-6)
    assert_allclose(table.time_s[i], 11.381419e-6, rtol=1e-6)


def test_padding_to_a_large_tile_makes_the_gemm_compute_bound() -> None:
    o_proj = row(o_proj_prefill(1024).prefill, "o_proj")
    assert o_proj.tensor_flops == FLOPS  # reported FLOPs stay the useful ones
    # 16 rows padded to 1024: 64 x 268,435,456 = 17,179,869,184 FLOP / 312e12 = 55.0637 µs
    assert o_proj.bound is Bound.COMPUTE
    assert_allclose(o_proj.time_s, 55.063683e-6, rtol=1e-6)


def test_energy_of_the_memory_bound_gemm() -> None:
    o_proj = row(o_proj_prefill(1).prefill, "o_proj")
    # idle 50 W for 11.3814 µs, plus (400 - 50) W x (0.5 x compute 0.86037 µs + 0.3 x memory
    # 11.3814 µs = 3.84461 µs): 5.69071e-4 J + 1.345614e-3 J = 1.914685e-3 J
    assert_allclose(o_proj.gpu_j, 1.914685e-3, rtol=1e-5)
