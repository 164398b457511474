"""envelope.sum_max_affine_many (decode's closed form) on one range against a brute-force sum
over integers: the common case (one line on top throughout) and crossings alike."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from service.core.envelope import sum_max_affine_many

INT_LINE = st.tuples(st.integers(-1000, 1000), st.integers(-50, 50))
FLOAT = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
Line = tuple[float, float]


def sum_max_affine(lines: list[Line], first: int, last: int) -> float:
    """The array form on one row."""
    intercepts = np.array([[a for a, _ in lines]])
    slopes = np.array([[b for _, b in lines]])
    return float(sum_max_affine_many(intercepts, slopes, np.array([first]), np.array([last]))[0])


def brute_force(lines: list[Line], first: int, last: int) -> float:
    return sum(max(a + b * c for a, b in lines) for c in range(first, last + 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(INT_LINE, min_size=1, max_size=6), st.integers(-20, 40), st.integers(-1, 60))
def test_integer_lines(lines: list[tuple[int, int]], first: int, span: int) -> None:
    as_float = [(float(a), float(b)) for a, b in lines]
    # integer lines: every partial sum is an exact float, so the two must agree exactly
    expected = brute_force(as_float, first, first + span)
    assert sum_max_affine(as_float, first, first + span) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(FLOAT, FLOAT), min_size=1, max_size=6),
    st.integers(0, 40),
    st.integers(-1, 60),
)
def test_float_lines(lines: list[Line], first: int, span: int) -> None:
    expected = brute_force(lines, first, first + span)
    scale = sum(abs(a) + abs(b) * (first + span) for a, b in lines) * (span + 1)
    got = sum_max_affine(lines, first, first + span)
    assert_allclose(got, expected, rtol=1e-9, atol=1e-12 * scale)


@pytest.mark.parametrize(
    ("lines", "first", "last", "expected"),
    [
        ([(1.0, 0.0), (0.0, 1.0)], 1, 1, 1.0),  # both lines are 1 at c = 1
        ([(0.0, 0.0), (0.0, 1.0)], 0, 0, 0.0),  # both 0 at c = 0
        ([(2.0, 0.0), (0.0, 1.0), (0.0, 0.5)], 2, 2, 2.0),  # 2, 2 and 1 at c = 2
    ],
)
def test_lines_tying_at_a_single_point(
    lines: list[Line], first: int, last: int, expected: float
) -> None:
    assert sum_max_affine(lines, first, last) == expected
