"""Requests' features as the model's input tensors: standardised, padded to a common node count,
stacked into one batch. Training and serving share this code as they share the feature encoder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.core.pass_plans import occupied
from service.pricing.regressor.features import Features, RequestFeatures

FloatArray = npt.NDArray[np.float64]
Float32Array = npt.NDArray[np.float32]

INPUT_NAMES = ("node_x", "adjacency", "readout_weight", "global_x", "log_analytical_j")
OUTPUT_NAMES = ("log_gpu_j", "log_phase_gpu_j")
TIME_OUTPUT_NAME = "log_tpot_correction"
"""The time head's output [B, 1]: log(measured / analytical served time per output token),
the ensemble's mean; exported only by models trained with a time head (train --time-weight)."""


def output_names(time_head: bool) -> tuple[str, ...]:
    """The exported model's outputs: the energy ones, then the time head's when it has one."""
    return (*OUTPUT_NAMES, TIME_OUTPUT_NAME) if time_head else OUTPUT_NAMES


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


def model_inputs(features: Features, norm: Normalisation) -> dict[str, Float32Array]:
    """The ONNX model's inputs (INPUT_NAMES), float32, for the requests of `features` in order
    (each on its own kernel graph, padded to the largest's node count).

    Every input but the last carries a length-1 axis 1 that broadcasts over the ensemble's
    members: node_x [B, 1, N, 2F], each node's standardised features then the mean of its
    neighbours' (the first GraphSAGE layer's aggregation: it depends on the inputs only, so it
    is computed here, once), zero on padded nodes; adjacency [B, 1, N, N];
    readout_weight [B, 1, 1, N] (1/n on a graph's n real nodes, 0 on padding: the mean
    readout); global_x [B, 1, 1, G] standardised; log_analytical_j [B, 2] [log J].
    """
    total = features.count
    width = norm.node_mean.shape[0]
    global_x = np.empty((total, 1, 1, norm.global_mean.shape[0]), dtype=np.float32)
    # standardised in float64, stored rounded to float32 (as astype would)
    np.divide(features.global_x - norm.global_mean, norm.global_std, out=global_x[:, 0, 0])
    if len(features.adjacency) == 1:  # one graph, no padded node: its tensors are cached
        (graph_adjacency,) = features.adjacency
        nodes = graph_adjacency.shape[0]
        standard = (features.node_x[:, :nodes] - norm.node_mean) / norm.node_std
        adjacency, readout = _one_graph_tensors(graph_adjacency, total)
        node_x = np.empty((total, 1, nodes, 2 * width), dtype=np.float32)
        node_x[:, 0, :, width:] = graph_adjacency @ standard  # neighbours' mean
    else:
        sizes = [a.shape[0] for a in features.adjacency]
        nodes = max(sizes[g] for g, rows in occupied(features.members))
        standard = (features.node_x[:, :nodes] - norm.node_mean) / norm.node_std
        node_x, adjacency, readout = _padded_graphs(features, standard, sizes, width)
    node_x[:, 0, :, :width] = standard
    return {
        "node_x": node_x,
        "adjacency": adjacency,
        "readout_weight": readout,
        "global_x": global_x,
        "log_analytical_j": features.log_analytical_j.astype(np.float32),
    }


def _padded_graphs(
    features: Features, standard: FloatArray, sizes: list[int], width: int
) -> tuple[Float32Array, Float32Array, Float32Array]:
    """node_x (neighbours' mean half filled, `standard`'s padded nodes zeroed in place),
    adjacency and readout of requests on several graphs (of `sizes` nodes), padded to the
    largest's node count (standard's)."""
    total, nodes = features.count, standard.shape[1]
    node_x = np.zeros((total, 1, nodes, 2 * width), dtype=np.float32)
    adjacency = np.zeros((total, 1, nodes, nodes), dtype=np.float32)
    readout = np.zeros((total, 1, 1, nodes), dtype=np.float32)
    for g, rows in occupied(features.members):
        graph_adjacency, n = features.adjacency[g], sizes[g]
        standard[rows, n:] = 0.0  # padded nodes are zero
        node_x[rows, 0, :n, width:] = graph_adjacency @ standard[rows, :n]  # neighbours' mean
        adjacency[rows, 0, :n, :n] = graph_adjacency
        readout[rows, 0, 0, :n] = 1.0 / n
    return node_x, adjacency, readout


# Per graph (its cached adjacency, found by identity) and request count: its adjacency and
# readout tensors, read-only. A serving process sees few graphs and pass sizes; the bound
# keeps a long-running one from growing (cleared when reached, not evicted).
_ONE_GRAPH_TENSORS: dict[tuple[int, int], tuple[FloatArray, Float32Array, Float32Array]] = {}
_ONE_GRAPH_TENSORS_MAX = 1024


def _one_graph_tensors(
    graph_adjacency: FloatArray, total: int
) -> tuple[Float32Array, Float32Array]:
    """The adjacency [total, 1, n, n] and mean readout [total, 1, 1, n] of `total` requests on
    one graph of n nodes."""
    key = (id(graph_adjacency), total)
    known = _ONE_GRAPH_TENSORS.get(key)
    if known is None or known[0] is not graph_adjacency:  # ids are reused once freed
        n = graph_adjacency.shape[0]
        adjacency = np.empty((total, 1, n, n), dtype=np.float32)
        adjacency[:, 0] = graph_adjacency
        readout = np.full((total, 1, 1, n), 1.0 / n, dtype=np.float32)
        adjacency.setflags(write=False)
        readout.setflags(write=False)
        if len(_ONE_GRAPH_TENSORS) >= _ONE_GRAPH_TENSORS_MAX:
            _ONE_GRAPH_TENSORS.clear()
        known = _ONE_GRAPH_TENSORS[key] = (graph_adjacency, adjacency, readout)
    return known[1], known[2]


def request_inputs(
    features: Sequence[RequestFeatures], norm: Normalisation
) -> dict[str, Float32Array]:
    """`model_inputs` of single requests (training's rows)."""
    return model_inputs(Features.of_requests(features), norm)
