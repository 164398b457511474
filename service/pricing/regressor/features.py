"""The regressor's input for N requests at once, each of its own context (model and deployment),
from the cost model's estimates of them: per-node features of both phases over each kernel
graph, and global features (named in service.pricing.regressor.feature_spec). One request is N = 1;
training and serving both encode through `workload_features`, so the two can never encode a
request differently. Pure numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.estimate import estimate_workloads
from service.core.estimates import WorkloadEstimates
from service.core.kernel_table import KernelTable
from service.core.work import WORK_FIELDS
from service.core.workload import Deployment, Workload
from service.pricing.regressor.context_features import (
    WORKLOAD_AT,
    ContextEncoding,
    context_encoding,
)
from service.pricing.regressor.feature_spec import (
    GLOBAL_FEATURES,
    MEMORY_WORK_FIELDS,
    MIN_ENERGY_J,
    MJ_PER_J,
    NODE_PHASE_FEATURES,
    SHAPE_FIELDS,
    US_PER_S,
)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class RequestFeatures:
    """One request, encoded (unnormalised).

    Attributes:
        node_x: [nodes, len(NODE_STATIC_FEATURES) + 2 * len(NODE_PHASE_FEATURES)]: static
            features, then prefill's, then decode's.
        adjacency: [nodes, nodes] mean-aggregation matrix (row i averages i's neighbours).
        global_x: [len(GLOBAL_FEATURES)].
        log_analytical_j: [2] log of the analytical prefill and decode GPU energy [J].
    """

    node_x: FloatArray
    adjacency: FloatArray
    global_x: FloatArray
    log_analytical_j: FloatArray


@dataclass(frozen=True, slots=True)
class Features:
    """RequestFeatures of N requests, each on its context's kernel graph, stacked and padded
    with zero nodes to one node count.

    Attributes:
        node_x: [N, nodes, node features]; global_x: [N, global features];
        log_analytical_j: [N, 2].
        adjacency: per graph, its [n, n] mean-aggregation matrix; graph: [N] each request's.
    """

    node_x: FloatArray
    global_x: FloatArray
    log_analytical_j: FloatArray
    adjacency: tuple[FloatArray, ...]
    graph: npt.NDArray[np.intp]

    @classmethod
    def of_requests(cls, requests: Sequence[RequestFeatures]) -> Features:
        """Single requests' features, each on its own graph."""
        nodes = max(r.node_x.shape[0] for r in requests)
        node_x = np.zeros((len(requests), nodes, requests[0].node_x.shape[1]))
        for j, request in enumerate(requests):
            node_x[j, : request.node_x.shape[0]] = request.node_x
        return cls(
            node_x,
            np.stack([r.global_x for r in requests]),
            np.stack([r.log_analytical_j for r in requests]),
            tuple(r.adjacency for r in requests),
            np.arange(len(requests), dtype=np.intp),
        )

    @property
    def count(self) -> int:
        return int(self.node_x.shape[0])

    def item(self, j: int) -> RequestFeatures:
        adjacency = self.adjacency[int(self.graph[j])]
        return RequestFeatures(
            self.node_x[j, : adjacency.shape[0]],
            adjacency,
            self.global_x[j],
            self.log_analytical_j[j],
        )


def request_features(
    arch: ModelArchitecture,
    workload: Workload,
    deployment: Deployment,
    coefficients: CostModelCoefficients,
) -> RequestFeatures:
    """Encode one request (its analytical estimate computed here, memory unchecked)."""
    estimates, errors = estimate_workloads(
        arch, [workload], deployment, coefficients, check_memory=False
    )
    if errors:
        raise errors[0]
    return workload_features(estimates).item(0)


def workload_features(estimates: WorkloadEstimates) -> Features:
    """The features of every workload of `estimates` (each priced in its own context)."""
    plans = estimates.plans
    encodings = [context_encoding(c) for c in plans.contexts]
    arrays = estimates.arrays
    totals = estimates.totals()  # [2, N, K, WORK_FIELDS]
    raw = np.empty((*totals.shape[:3], len(RAW_COLUMNS)))
    raw[..., 0] = arrays.executions
    raw[..., _COUNTS.start + 1 : _COUNTS.stop] = totals
    # time, compute, memory, network [s] and GPU energy [J]: one copy of their stacked block
    raw[..., _TIMES_AND_ENERGY] = np.moveaxis(arrays.stacked, 0, -1)
    n, kernels, width = totals.shape[1], totals.shape[2], encodings[0].static.shape[1]
    node_x = np.empty((n, kernels, width + 2 * len(NODE_PHASE_FEATURES)))
    for c, members in plans.groups():
        static = encodings[c].static
        node_x[members, : static.shape[0], :width] = static
        node_x[members, static.shape[0] :, :width] = 0.0
    # Prefill's block, then decode's, written in place: [N, K, 2, F] seen as [2, N, K, F].
    phases = node_x[:, :, width:].reshape(n, kernels, 2, -1).transpose(2, 0, 1, 3)
    phase_node_block_of(raw, out=phases)
    global_x = _global_matrix(estimates, totals, encodings)
    return Features(
        node_x=node_x,
        global_x=global_x,
        log_analytical_j=global_x[:, _LOG_PHASE_J],
        adjacency=tuple(encoding.adjacency for encoding in encodings),
        graph=plans.context,
    )


def safe_log(joules: float) -> float:
    """log of an energy [J], floored at 1 µJ (a request with one output token has no decode)."""
    return math.log(max(joules, MIN_ENERGY_J))


RAW_COLUMNS: tuple[str, ...] = (
    "executions",
    *WORK_FIELDS,
    "time_s",
    "compute_s",
    "memory_s",
    "network_s",
    "gpu_j",
)
"""Columns of a phase's raw per-kernel matrix (units: executions, ops, B, s, J)."""
_RAW = {name: i for i, name in enumerate(RAW_COLUMNS)}
_COUNTS = slice(0, 1 + len(WORK_FIELDS))  # executions and every Work field
_SHAPES = np.array([_RAW[f] for f in SHAPE_FIELDS])
_LIMBS = slice(_RAW["compute_s"], _RAW["network_s"] + 1)
_TIMES_AND_ENERGY = slice(_RAW["time_s"], _RAW["gpu_j"] + 1)
_TO_US_AND_MJ = np.array([US_PER_S] * 4 + [MJ_PER_J])
_SHARED = np.array([_RAW["time_s"], _RAW["gpu_j"]])
_ONE_HOT = np.eye(3)
_FIELD = {name: i for i, name in enumerate(WORK_FIELDS)}
# Work fields -> (tensor FLOPs, memory bytes, network bytes), the global "totals" of a phase.
_GLOBAL_TOTALS = np.zeros((len(WORK_FIELDS), 3))
_GLOBAL_TOTALS[_FIELD["tensor_flops"], 0] = 1.0
_GLOBAL_TOTALS[[_FIELD[f] for f in MEMORY_WORK_FIELDS], 1] = 1.0
_GLOBAL_TOTALS[_FIELD["network_bytes"], 2] = 1.0
# The global features that are the log analytical prefill and decode energies [log J].
_LOG_PHASE_J = np.array([GLOBAL_FEATURES.index(f"log_{p}_gpu_j") for p in ("prefill", "decode")])


def phase_raw(table: KernelTable) -> FloatArray:
    """[kernels, RAW_COLUMNS] of one phase's table (public table attributes only)."""
    return np.column_stack(
        [
            table.executions,
            table.totals_matrix,
            table.time_s,
            table.compute_s,
            table.memory_s,
            table.network_s,
            table.gpu_j,
        ]
    )


def phase_node_block_of(raw: FloatArray, out: FloatArray | None = None) -> FloatArray:
    """NODE_PHASE_FEATURES from a raw matrix [..., kernels, RAW_COLUMNS] (any leading axes:
    phases, requests; also used on prefill + decode in ablations), written into `out` when
    given. Shares are of the kernels' sums along the kernels axis."""
    counts = 1 + len(WORK_FIELDS)
    at = counts + len(SHAPE_FIELDS) + 5
    block = np.empty((*raw.shape[:-1], len(NODE_PHASE_FEATURES))) if out is None else out
    # Every log1p feature in one call, computed in place: counts, per-execution shapes, times
    # [µs], energy [mJ]. A kernel with no execution (decode of a one-token output) has all
    # counts 0: dividing by max(executions, 1) gives its per-execution shapes 0, the others
    # exactly count/executions.
    block[..., :counts] = raw[..., _COUNTS]
    np.divide(
        raw[..., _SHAPES],
        np.maximum(raw[..., :1], 1.0),
        out=block[..., counts : counts + len(SHAPE_FIELDS)],
    )
    np.multiply(raw[..., _TIMES_AND_ENERGY], _TO_US_AND_MJ, out=block[..., at - 5 : at])
    np.log1p(block[..., :at], out=block[..., :at])
    shared = raw[..., _SHARED]  # time_s, gpu_j
    total = np.add.reduce(shared, axis=-2, keepdims=True)
    block[..., at : at + 2] = 0.0  # a phase with no kernel time (no decode step) has no shares
    np.divide(shared, total, out=block[..., at : at + 2], where=total > 0)
    limbs = raw[..., _LIMBS]
    bound = block[..., at + 2 : at + 5]
    bound[:] = _ONE_HOT[limbs.argmax(axis=-1)]  # the first largest limb, as np.argmax picks
    bound *= np.maximum.reduce(limbs, axis=-1, keepdims=True) > 0
    return block


def _global_matrix(
    estimates: WorkloadEstimates, totals: FloatArray, encodings: Sequence[ContextEncoding]
) -> FloatArray:
    """[N, GLOBAL_FEATURES]: the global features of each request, filled in place column block
    by column block (few array operations: one request costs what many do)."""
    plans = estimates.plans
    rows = plans.rows
    sizes = estimates.sizes  # [N, (batch, prompt, output)]
    n, at = sizes.shape[0], WORKLOAD_AT
    out = np.empty((n, len(GLOBAL_FEATURES)))
    if len(encodings) == 1:  # every row's fixed values in place, broadcast
        out[:] = encodings[0].global_row
    else:
        out[:] = np.stack([encoding.global_row for encoding in encodings])[plans.context]
    np.log(sizes, out=out[:, at : at + 3])
    end = encodings[0].fixed.shape[0] + 3  # the fixed values resume after the workload's three
    out[:, end] = (rows.weight_bytes + estimates.kv_cache_bytes) / rows.capacity_bytes
    phase_s, phase_j = estimates.phase_s, estimates.phase_gpu_j
    gpu_j = phase_j[0] + phase_j[1]
    energies = np.empty((n, 3))
    energies[:, 0], energies[:, 1:] = gpu_j, phase_j.T
    np.log(np.maximum(energies, MIN_ENERGY_J), out=out[:, end + 7 : end + 10])
    # Every log1p feature in one call: per phase (tensor FLOPs, memory bytes, network bytes),
    # then the phase and overhead times [µs] and the time per output token [ms].
    logged = np.empty((n, 11))
    phase_totals = np.add.reduce(totals, axis=2) @ _GLOBAL_TOTALS  # [2, N, 3]
    logged[:, :6] = phase_totals.transpose(1, 0, 2).reshape(n, 6)
    logged[:, 6:8] = US_PER_S * phase_s.T
    logged[:, 8:10] = US_PER_S * estimates.overhead_s.T
    steps = sizes[:, 2] - 1.0
    logged[:, 10] = 0.0  # no decode step: no time per output token
    np.divide(1e3 * phase_s[1], steps, out=logged[:, 10], where=steps > 0)
    np.log1p(logged, out=logged)
    out[:, end + 1 : end + 7] = logged[:, :6]
    out[:, end + 10 : end + 15] = logged[:, 6:]
    kernel_s = phase_s[0] + phase_s[1]
    out[:, end + 15] = gpu_j / (np.maximum(kernel_s, 1e-12) * rows.held * rows.tdp_w)
    return out
