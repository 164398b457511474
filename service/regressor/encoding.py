"""Requests' features as the model's input tensors: standardised, padded to a common node count,
stacked into a batch. Training and serving share this code as they share `request_features`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.regressor.features import RequestFeatures

FloatArray = npt.NDArray[np.float64]
Float32Array = npt.NDArray[np.float32]

INPUT_NAMES = ("node_x", "adjacency", "node_mask", "global_x", "log_analytical_j")
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


def model_inputs(
    features: Sequence[RequestFeatures], norm: Normalisation
) -> dict[str, Float32Array]:
    """The ONNX model's inputs (INPUT_NAMES) for a batch of requests, float32.

    node_x [B, N, F] standardised, zero on padded nodes; adjacency [B, N, N]; node_mask [B, N]
    (1 for real nodes); global_x [B, G] standardised; log_analytical_j [B, 2].
    """
    batch = len(features)
    nodes = max(f.node_x.shape[0] for f in features)
    node_x = np.zeros((batch, nodes, norm.node_mean.shape[0]), dtype=np.float32)
    adjacency = np.zeros((batch, nodes, nodes), dtype=np.float32)
    mask = np.zeros((batch, nodes), dtype=np.float32)
    for b, f in enumerate(features):
        n = f.node_x.shape[0]
        node_x[b, :n] = (f.node_x - norm.node_mean) / norm.node_std
        adjacency[b, :n, :n] = f.adjacency
        mask[b, :n] = 1.0
    global_x = (np.stack([f.global_x for f in features]) - norm.global_mean) / norm.global_std
    return {
        "node_x": node_x,
        "adjacency": adjacency,
        "node_mask": mask,
        "global_x": global_x.astype(np.float32),
        "log_analytical_j": np.stack([f.log_analytical_j for f in features]).astype(np.float32),
    }
