"""Requests' features as the model's input tensors: standardised, padded to a common node count,
stacked into one batch. Training and serving share this code as they share the feature encoder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.pricing.regressor.features import Features, RequestFeatures

FloatArray = npt.NDArray[np.float64]
Float32Array = npt.NDArray[np.float32]

INPUT_NAMES = ("node_x", "adjacency", "readout_weight", "global_x", "log_analytical_j")
OUTPUT_NAMES = ("log_gpu_j", "log_phase_gpu_j")
MIN_STD = 1e-6


@dataclass(frozen=True, slots=True)
class Normalisation:
    """Per-feature mean and standard deviation of the training set (nodes: real nodes only)."""

    node_mean: FloatArray
    node_std: FloatArray
    global_mean: FloatArray
    global_std: FloatArray

    @classmethod
    def fit(cls, features: Sequence[RequestFeatures]) -> Normalisation:
        nodes = np.concatenate([f.node_x for f in features], axis=0)
        globals_ = np.stack([f.global_x for f in features])
        return cls(nodes.mean(0), _std(nodes), globals_.mean(0), _std(globals_))

    def as_dict(self) -> dict[str, list[float]]:
        return {
            "node_mean": self.node_mean.tolist(),
            "node_std": self.node_std.tolist(),
            "global_mean": self.global_mean.tolist(),
            "global_std": self.global_std.tolist(),
        }

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Normalisation:
        return cls(
            *(
                np.asarray(document[k], dtype=np.float64)
                for k in ("node_mean", "node_std", "global_mean", "global_std")
            )
        )


def _std(values: FloatArray) -> FloatArray:
    std = values.std(0)
    return np.where(std < MIN_STD, 1.0, std)


def model_inputs(groups: Sequence[Features], norm: Normalisation) -> dict[str, Float32Array]:
    """The ONNX model's inputs (INPUT_NAMES), float32, for the requests of `groups` in order
    (each group shares one kernel graph; a single request is a group of one).

    Every input but the last carries a length-1 axis 1 that broadcasts over the ensemble's
    members: node_x [B, 1, N, 2F], each node's standardised features then the mean of its
    neighbours' (the first GraphSAGE layer's aggregation: it depends on the inputs only, so it
    is computed here, once), zero on padded nodes; adjacency [B, 1, N, N];
    readout_weight [B, 1, 1, N] (1/n on a graph's n real nodes, 0 on padding: the mean
    readout); global_x [B, 1, 1, G] standardised; log_analytical_j [B, 2] [log J].
    """
    total = sum(group.count for group in groups)
    nodes = max(group.adjacency.shape[0] for group in groups)
    width = norm.node_mean.shape[0]
    node_x = np.zeros((total, 1, nodes, 2 * width), dtype=np.float32)
    adjacency = np.zeros((total, 1, nodes, nodes), dtype=np.float32)
    readout = np.zeros((total, 1, 1, nodes), dtype=np.float32)
    start = 0
    for group in groups:
        count, n = group.count, group.adjacency.shape[0]
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


def request_inputs(
    features: Sequence[RequestFeatures], norm: Normalisation
) -> dict[str, Float32Array]:
    """`model_inputs` of single requests (training's rows), each a group of one."""
    return model_inputs([Features.of_one(f) for f in features], norm)
