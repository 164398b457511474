"""Focused sampling as row weights: where the measured rows are sparse relative to what users
ask for, each row counts more.

Two priors, each a histogram over coarse bins: model size (active parameters) over the
architecture catalogue, and output length over the Azure LLM inference trace (code and
conversation requests pooled). A row's weight is the product of prior share / data share of its
two bins, clipped to [1/4, 4] so no row dominates, and scaled to mean 1. The measured data we
train on are fixed (we cannot sample new configurations as LLMCO2 does), so importance weights
are the simple way to focus the fit on the common cases.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

ACTIVE_PARAMETER_EDGES = (2e9, 5e9, 12e9, 30e9, 80e9)
OUTPUT_TOKEN_EDGES = (128, 256, 512, 1024)
WEIGHT_CLIP = (0.25, 4.0)


def bin_shares(values: Sequence[float], edges: Sequence[float]) -> FloatArray:
    """Share of `values` in each of the len(edges) + 1 bins."""
    counts = np.bincount(np.digitize(values, edges), minlength=len(edges) + 1)
    return np.asarray(counts / max(counts.sum(), 1), dtype=np.float64)


def focused_weights(
    active_parameters: Sequence[float],
    output_tokens: Sequence[float],
    catalogue_active_parameters: Sequence[float],
    trace_output_tokens: Sequence[float],
) -> FloatArray:
    """Weight of each row (mean 1) from the two priors; see the module docstring."""
    weight = np.ones(len(active_parameters))
    for values, prior_values, edges in (
        (active_parameters, catalogue_active_parameters, ACTIVE_PARAMETER_EDGES),
        (output_tokens, trace_output_tokens, OUTPUT_TOKEN_EDGES),
    ):
        bins = np.digitize(values, edges)
        data = bin_shares(values, edges)
        prior = bin_shares(prior_values, edges)
        weight *= prior[bins] / data[bins]
    weight = np.clip(weight, *WEIGHT_CLIP)
    return np.asarray(weight / weight.mean(), dtype=np.float64)
