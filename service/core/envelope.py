"""Sums over integer ranges of the maximum of affine lines, for many ranges at once.

Between consecutive crossings of any two lines the order of the lines does not change, so
cutting each range at every crossing inside it leaves segments on which one line is on top; its
sum over a segment is an arithmetic series. In the common case one line is on top at both ends
of every range, hence everywhere between (the maximum is convex), and the cuts are not needed.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@lru_cache(maxsize=16)
def _pairs(lines: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Indices (i, j), i < j, of every pair of `lines` lines, in row-major order."""
    first_i, second_i = np.triu_indices(lines, 1)
    return first_i, second_i


def sum_affine_many(
    intercept: FloatArray, slope: FloatArray, first: FloatArray, last: FloatArray
) -> FloatArray:
    """Sum over integers c in [first, last] of intercept + slope * c (0 on empty ranges)."""
    count = np.maximum(last - first + 1.0, 0.0)
    result: FloatArray = intercept * count + slope * (first + last) * count / 2.0
    return result


def sum_max_affine_many(
    intercepts: FloatArray, slopes: FloatArray, first: FloatArray, last: FloatArray
) -> FloatArray:
    """Sum over integers c in [first, last] of max_u (intercepts[..., u] + slopes[..., u] c).

    `intercepts` and `slopes` are [..., lines]; `first` and `last` [...] integer-valued; an
    empty range (last < first) sums to 0.
    """
    common = _one_line_on_top(intercepts, slopes, first, last)
    if common is not None:
        return common
    first_i, second_i = _pairs(intercepts.shape[-1])
    upper = np.maximum(last + 1.0, first)  # an empty range: every cut at `first`
    # Every pair of lines crosses once (unless parallel): all pairs in one set of operations.
    d_slope = slopes[..., first_i] - slopes[..., second_i]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = (intercepts[..., second_i] - intercepts[..., first_i]) / d_slope
    low, high = first[..., None], upper[..., None]
    inside = (d_slope != 0.0) & (x > low) & (x < high)
    crossings = np.where(inside, x, low)  # a cut at `first` adds an empty segment
    cuts = np.concatenate([low, high, crossings], axis=-1)
    ordered = np.sort(cuts, axis=-1)
    lo = np.ceil(ordered[..., :-1])
    hi = np.ceil(ordered[..., 1:]) - 1.0
    count = np.maximum(hi - lo + 1.0, 0.0)
    mid = (lo + hi) / 2.0
    # [..., segments, lines]: each line's value at each segment's midpoint.
    at_mid = intercepts[..., None, :] + slopes[..., None, :] * mid[..., None]
    top = at_mid.argmax(axis=-1)  # [..., segments]: the line on top of each segment
    a = np.take_along_axis(intercepts, top, -1)
    b = np.take_along_axis(slopes, top, -1)
    series = a * count + b * (lo + hi) * count / 2.0
    result: FloatArray = series.sum(axis=-1)
    return result


def _one_line_on_top(
    intercepts: FloatArray, slopes: FloatArray, first: FloatArray, last: FloatArray
) -> FloatArray | None:
    """The sum when, in every row [N, lines], the line highest at `first` is also highest at
    `last` (a convex maximum that touches one line at both ends is that line); else None."""
    if intercepts.ndim != 2:
        return None
    rows = np.arange(intercepts.shape[0])
    top = (intercepts + slopes * first[:, None]).argmax(axis=1)
    at_last = intercepts + slopes * last[:, None]
    if not np.all(at_last[rows, top] >= at_last.max(axis=1)):
        return None
    return sum_affine_many(intercepts[rows, top], slopes[rows, top], first, last)
