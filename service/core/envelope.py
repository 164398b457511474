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


@lru_cache(maxsize=64)
def _row_starts(rows: int, lines: int) -> npt.NDArray[np.intp]:
    """Where each of `rows` rows of `lines` values starts in their flattened array."""
    starts = np.arange(0, rows * lines, lines)
    starts.setflags(write=False)
    return starts


def sum_affine_many(
    intercept: FloatArray | float, slope: FloatArray | float, first: FloatArray, last: FloatArray
) -> FloatArray:
    """Sum over integers c in [first, last] of intercept + slope * c (0 on empty ranges); the
    intercept and slope per range, or one for all."""
    count = np.maximum(last - first + 1.0, 0.0)
    result: FloatArray = intercept * count + slope * (first + last) * count / 2.0
    return result


def sum_of_integers(first: FloatArray, last: FloatArray) -> FloatArray:
    """Sum of the integers c in [first, last] (0 on empty ranges): sum_affine_many of c."""
    count = np.maximum(last - first + 1.0, 0.0)
    result: FloatArray = (first + last) * count / 2.0
    return result


def sum_max_affine_many(
    intercepts: FloatArray,
    slopes: FloatArray,
    first: FloatArray,
    last: FloatArray,
    count: FloatArray | None = None,
) -> FloatArray:
    """Sum over integers c in [first, last] of max_u (intercepts[..., u] + slopes[..., u] c),
    for every row (every index but the last).

    `intercepts` and `slopes` are [..., lines]; `first` and `last` integer-valued, of the
    rows' shape or broadcasting to it (one range for many rows); an empty range
    (last < first) sums to 0; `count`, the integers in each range (max(last - first + 1, 0)),
    when the caller has it. Rows whose top line at `first` is also on top at `last` are that
    line's sum, the mean of its ends times the count; only the others are cut at their lines'
    crossings.
    """
    shape, lines = intercepts.shape[:-1], intercepts.shape[-1]
    # Every line at both ends, rows flattened ([rows, lines]; broadcast ranges made whole).
    at_first = (intercepts + slopes * first[..., None]).reshape(-1, lines)
    at_last = (intercepts + slopes * last[..., None]).reshape(-1, lines)
    # Each row's top line at `first`, as an index into the flattened arrays.
    top = at_first.argmax(axis=1)
    top += _row_starts(top.shape[0], lines)
    top_last = at_last.take(top)
    if count is None:
        count = np.maximum(last - first + 1.0, 0.0)
    # A convex maximum that touches one line at both ends is that line.
    result: FloatArray = ((at_first.take(top) + top_last).reshape(shape) * count) / 2.0
    # (One test for all rows first: in the common case every row's top line stays on top;
    # a direct count of the lines at or below it costs a fraction of ndarray.all().)
    if np.count_nonzero(at_last <= top_last[:, None]) != at_last.size:
        cut = np.flatnonzero(~(top_last >= np.maximum.reduce(at_last, axis=1)))
        flat = result.reshape(-1)  # a view: result is a fresh array of the rows' shape
        ends = [np.broadcast_to(end, shape).reshape(-1)[cut] for end in (first, last)]
        flat[cut] = _sum_by_segments(
            intercepts.reshape(-1, lines)[cut], slopes.reshape(-1, lines)[cut], *ends
        )
    return result


def _sum_by_segments(
    intercepts: FloatArray, slopes: FloatArray, first: FloatArray, last: FloatArray
) -> FloatArray:
    """sum_max_affine_many of rows [rows, lines], each range cut at every crossing of two of
    its lines inside it: on each segment one line is on top, summed as an arithmetic series."""
    first_i, second_i = _pairs(intercepts.shape[1])
    low = first[:, None]
    high = np.maximum(last + 1.0, first)[:, None]  # an empty range: every cut at `first`
    # Every pair of lines crosses once (unless parallel): all pairs in one set of operations;
    # a parallel pair's "crossing" is a cut at `first`, which adds an empty segment.
    d_slope = slopes[:, first_i] - slopes[:, second_i]
    x = np.divide(
        intercepts[:, second_i] - intercepts[:, first_i],
        d_slope,
        out=np.repeat(low, d_slope.shape[1], axis=1).astype(np.float64, copy=False),
        where=d_slope != 0.0,
    )
    crossings = np.where((x > low) & (x < high), x, low)
    ordered = np.sort(np.concatenate([low, high, crossings], axis=1), axis=1)
    lo = np.ceil(ordered[:, :-1])
    hi = np.ceil(ordered[:, 1:]) - 1.0
    count = np.maximum(hi - lo + 1.0, 0.0)
    mid = (lo + hi) / 2.0
    # [rows, segments, lines]: each line's value at each segment's midpoint; the line on top
    # of each segment is summed over it as an arithmetic series.
    at_mid = intercepts[:, None, :] + slopes[:, None, :] * mid[:, :, None]
    top = at_mid.argmax(axis=2)  # [rows, segments]
    rows = np.arange(intercepts.shape[0])[:, None]
    series = intercepts[rows, top] * count + slopes[rows, top] * (lo + hi) * count / 2.0
    result: FloatArray = series.sum(axis=1)
    return result
