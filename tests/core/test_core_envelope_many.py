"""The array envelope sums (service.core.envelope) equal an explicit loop over the integers, on
random lines with crossings, ties, parallel lines and empty ranges, and on rows where one line
stays on top (the common case, summed without cutting the ranges)."""

from __future__ import annotations

import numpy as np
from numpy.testing import assert_allclose

from service.core.envelope import sum_affine_many, sum_max_affine_many, sum_of_integers


def brute_force(intercepts: np.ndarray, slopes: np.ndarray, first: int, last: int) -> float:
    return sum(
        max(a + b * c for a, b in zip(intercepts, slopes, strict=True))
        for c in range(first, last + 1)
    )


def test_many_ranges_equal_the_loop() -> None:
    rng = np.random.default_rng(20261122)
    count, lines = 400, 5
    intercepts = rng.uniform(0.0, 50.0, (count, lines))
    slopes = rng.uniform(0.0, 2.0, (count, lines))
    slopes[::7, 1] = slopes[::7, 0]  # parallel lines
    intercepts[::11, 2] = intercepts[::11, 3]  # lines through a common point at c = 0
    slopes[::11, 2] = slopes[::11, 3]  # identical lines
    first = rng.integers(0, 40, count).astype(float)
    last = first + rng.integers(-3, 60, count)  # some empty ranges
    many = sum_max_affine_many(intercepts, slopes, first, last)
    for n in range(count):
        a, b, lo, hi = intercepts[n], slopes[n], int(first[n]), int(last[n])
        assert_allclose(many[n], brute_force(a, b, lo, hi), rtol=1e-12, atol=1e-9)
        if hi < lo:
            assert many[n] == 0.0


def test_rows_with_one_line_on_top_throughout() -> None:
    # Decode attention's usual shape: the memory line (steepest, highest) is on top everywhere.
    rng = np.random.default_rng(20261126)
    count = 50
    intercepts = rng.uniform(0.0, 1.0, (count, 4))
    slopes = rng.uniform(0.0, 0.5, (count, 4))
    intercepts[:, 3] += 2.0
    slopes[:, 3] += 1.0
    first = rng.integers(1, 30, count).astype(float)
    last = first + rng.integers(-2, 40, count)
    many = sum_max_affine_many(intercepts, slopes, first, last)
    for n in range(count):
        lo, hi = int(first[n]), int(last[n])
        expected = sum(intercepts[n, 3] + slopes[n, 3] * c for c in range(lo, hi + 1))
        assert_allclose(many[n], expected, rtol=1e-12, atol=1e-9)


def test_rows_of_more_axes_share_broadcast_ranges() -> None:
    # Decode's shape: [workloads, kernels, lines] rows, one range per workload (broadcast).
    rng = np.random.default_rng(20261127)
    intercepts = rng.uniform(0.0, 50.0, (6, 4, 5))
    slopes = rng.uniform(0.0, 2.0, (6, 4, 5))
    first = rng.integers(0, 40, 6).astype(float)
    last = first + rng.integers(-3, 60, 6)
    many = sum_max_affine_many(intercepts, slopes, first[:, None], last[:, None])
    assert many.shape == (6, 4)
    for n in range(6):
        for k in range(4):
            expected = brute_force(intercepts[n, k], slopes[n, k], int(first[n]), int(last[n]))
            assert_allclose(many[n, k], expected, rtol=1e-12, atol=1e-9)


def test_affine_sum_is_the_arithmetic_series() -> None:
    first, last = np.array([3.0, 10.0, 5.0]), np.array([7.0, 9.0, 5.0])
    result = sum_affine_many(np.array([1.0, 1.0, 2.0]), np.array([2.0, 2.0, 0.5]), first, last)
    # 5 terms of 1 + 2c for c = 3..7: 5 + 2 * 25 = 55; an empty range; one term 2 + 2.5.
    assert_allclose(result, [55.0, 0.0, 4.5], rtol=0, atol=0)


def test_sum_of_integers_is_the_arithmetic_series_and_sum_affine_many_of_c() -> None:
    first = np.array([1.0, 5.0, 3.0, 513.0])
    last = np.array([4.0, 5.0, 2.0, 767.0])
    # 1+2+3+4, the one integer 5, an empty range, 513..767 = 255 terms averaging 640
    expected = np.array([10.0, 5.0, 0.0, 255 * 640.0])
    assert np.array_equal(sum_of_integers(first, last), expected)
    assert np.array_equal(sum_of_integers(first, last), sum_affine_many(0.0, 1.0, first, last))
