"""The ONNX model's inputs for groups of requests that share a kernel graph (BatchFeatures):
`encoding.model_inputs` of all their requests, built group by group in array operations."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from service.regressor.batch_features import BatchFeatures
from service.regressor.encoding import Float32Array, Normalisation


def batch_model_inputs(
    groups: Sequence[BatchFeatures], norm: Normalisation
) -> dict[str, Float32Array]:
    """What `model_inputs` returns for the groups' requests in order (see its shapes)."""
    total = sum(group.node_x.shape[0] for group in groups)
    nodes = max(group.adjacency.shape[0] for group in groups)
    width = norm.node_mean.shape[0]
    node_x = np.zeros((total, 1, nodes, 2 * width), dtype=np.float32)
    adjacency = np.zeros((total, 1, nodes, nodes), dtype=np.float32)
    readout = np.zeros((total, 1, 1, nodes), dtype=np.float32)
    start = 0
    for group in groups:
        count, n = group.node_x.shape[0], group.adjacency.shape[0]
        rows = slice(start, start + count)
        standard = (group.node_x - norm.node_mean) / norm.node_std  # [count, n, width]
        node_x[rows, 0, :n, :width] = standard
        node_x[rows, 0, :n, width:] = group.adjacency @ standard  # neighbours' mean
        adjacency[rows, 0, :n, :n] = group.adjacency
        readout[rows, 0, 0, :n] = 1.0 / n
        start += count
    global_x = np.concatenate([group.global_x for group in groups])
    global_x = (global_x - norm.global_mean) / norm.global_std
    log_analytical_j = np.concatenate([group.log_analytical_j for group in groups])
    return {
        "node_x": node_x,
        "adjacency": adjacency,
        "readout_weight": readout,
        "global_x": global_x.astype(np.float32)[:, None, None, :],
        "log_analytical_j": log_analytical_j.astype(np.float32),
    }
