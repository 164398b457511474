"""Sums over integer ranges of the maximum of affine lines, for many ranges at once.

The array form of roofline.sum_max_affine: between consecutive crossings of any two lines the
order of the lines does not change, so cutting each range at every crossing inside it leaves
segments on which one line is on top; its sum over a segment is an arithmetic series.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


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
    lines = intercepts.shape[-1]
    upper = np.maximum(last + 1.0, first)  # an empty range: every cut at `first`
    cuts = [first, upper]
    for i in range(lines):
        for j in range(i + 1, lines):
            d_slope = slopes[..., i] - slopes[..., j]
            with np.errstate(divide="ignore", invalid="ignore"):
                x = (intercepts[..., j] - intercepts[..., i]) / d_slope
            inside = (d_slope != 0.0) & (x > first) & (x < upper)
            cuts.append(np.where(inside, x, first))  # a cut at `first` adds an empty segment
    ordered = np.sort(np.stack(cuts, axis=-1), axis=-1)
    lo = np.ceil(ordered[..., :-1])
    hi = np.ceil(ordered[..., 1:]) - 1.0
    count = np.maximum(hi - lo + 1.0, 0.0)
    mid = (lo + hi) / 2.0
    # [..., segments, lines]: each line's value at each segment's midpoint.
    at_mid = intercepts[..., None, :] + slopes[..., None, :] * mid[..., None]
    top = at_mid.argmax(axis=-1)[..., None]
    a = np.take_along_axis(np.broadcast_to(intercepts[..., None, :], at_mid.shape), top, -1)
    b = np.take_along_axis(np.broadcast_to(slopes[..., None, :], at_mid.shape), top, -1)
    series = a[..., 0] * count + b[..., 0] * (lo + hi) * count / 2.0
    result: FloatArray = series.sum(axis=-1)
    return result
