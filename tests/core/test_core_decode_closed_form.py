"""The closed-form sum over decode steps against brute-force loops."""

from __future__ import annotations

import dataclasses

import pytest
from core_support import A100_1_5TB, IDEAL, POWER, column_sum, deployment, estimate
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.results import Bound
from service.core.roofline import sum_max_affine

LINE = st.tuples(st.integers(-1000, 1000), st.integers(-50, 50))
FLOAT = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


def brute_force(lines: list[tuple[float, float]], first: int, last: int) -> float:
    return sum(max(a + b * c for a, b in lines) for c in range(first, last + 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, min_size=1, max_size=6), st.integers(-20, 40), st.integers(-1, 60))
def test_sum_max_affine_integer_lines(lines: list[tuple[int, int]], first: int, span: int) -> None:
    as_float = [(float(a), float(b)) for a, b in lines]
    # integer lines: every partial sum is an exact float, so the two must agree exactly
    assert sum_max_affine(as_float, first, first + span) == brute_force(as_float, first, first + span)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(FLOAT, FLOAT), min_size=1, max_size=6), st.integers(0, 40),
       st.integers(-1, 60))
def test_sum_max_affine_float_lines(lines: list[tuple[float, float]], first: int, span: int) -> None:
    expected = brute_force(lines, first, first + span)
    scale = sum(abs(a) + abs(b) * (first + span) for a, b in lines) * (span + 1)
    assert_allclose(sum_max_affine(lines, first, first + span), expected, rtol=1e-9,
                    atol=1e-12 * scale)


# MHA with one sliding-window layer of 16 tokens; 8 heads of 128 keep K/V reads heavy.
ARCH = ModelArchitecture(
    hidden_size=1024,
    num_layers=2,
    num_attention_heads=8,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=4096,
    vocab_size=1000,
    sliding_window_tokens=16,
    num_sliding_window_layers=1,
)
# A GPU with slow special-function units: decode attention at batch 4 reads 16,384 B of K/V
# (~10.9 ns at 1.5 TB/s) but needs 32 exps (12.8 ns at 2.5e9/s) per key, so it turns from
# memory-bound to exp-bound (compute) part way through the decode, at c ≈ 12.
SLOW_EXP_GPU = dataclasses.replace(A100_1_5TB, special_function_ops_per_s=2.5e9)
OVERHEADS = dataclasses.replace(
    IDEAL,
    roofline=dataclasses.replace(
        IDEAL.roofline, kernel_launch_s=3e-6, decode_step_overhead_s=1e-4, gemm_tile_m=64
    ),
)
BATCH, PROMPT, OUTPUT = 4, 5, 30  # decode contexts 6..34 straddle the window and the crossing


@pytest.mark.parametrize("flash", [True, False])
@pytest.mark.parametrize("coefficients", [IDEAL, OVERHEADS], ids=["ideal", "overheads"])
def test_decode_equals_sum_of_single_steps(flash: bool, coefficients: CostModelCoefficients) -> None:
    dep = deployment(SLOW_EXP_GPU, flash=flash)
    whole = estimate(ARCH, BATCH, PROMPT, OUTPUT, dep, coefficients).decode
    # prompt p + j − 1 and 2 outputs: one decode step at context p + j (prompt + j keys)
    steps = [
        estimate(ARCH, BATCH, PROMPT + j - 1, 2, dep, coefficients).decode
        for j in range(1, OUTPUT)
    ]
    attention = "attention" if flash else "attention_scores"
    bounds = {step.table.bounds[_index(step.table.nodes, attention)] for step in steps}
    assert bounds == {Bound.MEMORY, Bound.COMPUTE}  # the envelope really switches lines
    assert_allclose(whole.time_s, sum(s.time_s for s in steps), rtol=1e-12)
    assert_allclose(whole.gpu_j, sum(s.gpu_j for s in steps), rtol=1e-12)
    for field in ("kv_cache_read_bytes", "tensor_flops", "special_function_ops"):
        assert_allclose(
            column_sum(whole, field), sum(column_sum(s, field) for s in steps), rtol=1e-12
        )


def test_power_cap_binding_in_some_steps_only() -> None:
    """With compute + memory weights above 1 the TDP cap binds in some steps and not in others;
    decode energy should still be the sum of its steps' energies."""
    hot = dataclasses.replace(IDEAL, power=dataclasses.replace(POWER, compute=0.8, memory=0.5))
    dep = deployment(SLOW_EXP_GPU)
    whole = estimate(ARCH, BATCH, PROMPT, OUTPUT, dep, hot).decode
    steps = [estimate(ARCH, BATCH, PROMPT + j - 1, 2, dep, hot).decode for j in range(1, OUTPUT)]
    assert_allclose(whole.gpu_j, sum(s.gpu_j for s in steps), rtol=1e-12)


def _index(nodes: tuple[object, ...], name: str) -> int:
    return [getattr(node, "name", None) for node in nodes].index(name)
