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
    ContextEncoding,
    context_encoding,
)
from service.pricing.regressor.feature_spec import (
    GLOBAL_FEATURE_GROUPS,
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
        adjacency: per graph, its [n, n] mean-aggregation matrix; graph: [N] each request's;
        members: per graph, its requests (a slice: requests come graph by graph).
    """

    node_x: FloatArray
    global_x: FloatArray
    log_analytical_j: FloatArray
    adjacency: tuple[FloatArray, ...]
    graph: npt.NDArray[np.intp]
    members: tuple[slice, ...]

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
            tuple(slice(j, j + 1) for j in range(len(requests))),
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
    """The features of every workload of `estimates` (each priced in its own context), read
    from the arrays pricing holds (per-kernel executions, seconds and energy, and its counts)
    without copying them into an intermediate matrix."""
    plans = estimates.plans
    encodings = [context_encoding(c) for c in plans.contexts]
    arrays = estimates.arrays
    counts = estimates.totals()  # [2, N, K, WORK_FIELDS]
    n, kernels = counts.shape[1], counts.shape[2]
    width = encodings[0].static.shape[1]
    node_x = np.empty((n, kernels, width + 2 * len(NODE_PHASE_FEATURES)))
    if len(encodings) == 1:  # broadcast over the requests, padded kernels 0
        static = encodings[0].static
        node_x[:, : static.shape[0], :width] = static
        node_x[:, static.shape[0] :, :width] = 0.0
    else:
        for c, members in plans.groups():
            static = encodings[c].static
            node_x[members, : static.shape[0], :width] = static
            node_x[members, static.shape[0] :, :width] = 0.0
    # Prefill's block, then decode's, written in place: [N, K, 2, F] seen as [2, N, K, F].
    phases = node_x[:, :, width:].reshape(n, kernels, 2, -1).transpose(2, 0, 1, 3)
    # time, compute, memory, network [s] and GPU energy [J] of [5, 2, N, K] seen as [2, N, K, 5]
    timed = arrays.stacked.transpose(1, 2, 3, 0)
    kernel_s, kernel_j = estimates.kernel_s, estimates.kernel_gpu_j  # the sums pricing made
    phase_node_block(arrays.executions, counts, timed, kernel_s, kernel_j, out=phases)
    global_x = _global_matrix(estimates, counts, encodings)
    return Features(
        node_x=node_x,
        global_x=global_x,
        log_analytical_j=global_x[:, _LOG_PHASE_J],
        adjacency=tuple([encoding.adjacency for encoding in encodings]),
        graph=plans.context,
        members=plans.members,
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
_WORK = slice(1, 1 + len(WORK_FIELDS))  # every Work field
_TIMES_AND_ENERGY = slice(_RAW["time_s"], _RAW["gpu_j"] + 1)


def _runs(columns: list[int], into: int) -> tuple[tuple[int, tuple[int, int]], ...]:
    """`columns` as runs of adjacent ones: (where the run goes from `into` on, (start, stop))."""
    runs: list[tuple[int, tuple[int, int]]] = []
    for at, column in enumerate(columns, into):
        if runs and runs[-1][1][1] == column:
            runs[-1] = (runs[-1][0], (runs[-1][1][0], column + 1))
        else:
            runs.append((at, (column, column + 1)))
    return tuple(runs)


# Per-execution shapes: their Work columns, as runs of adjacent ones, and where they go.
_SHAPE_RUNS = _runs([WORK_FIELDS.index(f) for f in SHAPE_FIELDS], 1 + len(WORK_FIELDS))
_TO_US_AND_MJ = np.array([US_PER_S] * 4 + [MJ_PER_J])
_SHARED_RAW = np.array([_RAW["time_s"], _RAW["gpu_j"]])
_SMALLEST = np.array(np.finfo(np.float64).smallest_subnormal)  # any positive sum is at least
# Scalars as 0-d arrays: numpy converts a Python float operand on every call, which costs
# more than the operation on a single request's arrays.
_ONE = np.array(1.0)
_MIN_ENERGY_J = np.array(MIN_ENERGY_J)
_US_PER_S = np.array(US_PER_S)
_MS_PER_S = np.array(1e3)
_MIN_KERNEL_S = np.array(1e-12)
_ONE_HOT_OR_NONE = np.vstack([np.zeros(3), np.eye(3)])  # none, compute, memory, network
_FIELD = {name: i for i, name in enumerate(WORK_FIELDS)}
# Work fields -> (tensor FLOPs, memory bytes, network bytes), the global "totals" of a phase.
_GLOBAL_TOTALS = np.zeros((len(WORK_FIELDS), 3))
_GLOBAL_TOTALS[_FIELD["tensor_flops"], 0] = 1.0
_GLOBAL_TOTALS[[_FIELD[f] for f in MEMORY_WORK_FIELDS], 1] = 1.0
_GLOBAL_TOTALS[_FIELD["network_bytes"], 2] = 1.0
# The global features that are the log analytical prefill and decode energies [log J].
_LOG_PHASE_J = slice(
    GLOBAL_FEATURES.index("log_prefill_gpu_j"), 2 + GLOBAL_FEATURES.index("log_prefill_gpu_j")
)
assert GLOBAL_FEATURES[_LOG_PHASE_J] == ("log_prefill_gpu_j", "log_decode_gpu_j")
# Where the per-request global features go, in the order _global_matrix computes them.
_SCRATCH_COLUMNS = np.array(
    [
        GLOBAL_FEATURES.index(name)
        for name in (
            *GLOBAL_FEATURE_GROUPS["workload"],
            "log_gpu_j",
            "log_prefill_gpu_j",
            "log_decode_gpu_j",
            *GLOBAL_FEATURE_GROUPS["totals"],
            "log_prefill_us",
            "log_decode_us",
            "log_prefill_overhead_us",
            "log_decode_overhead_us",
            "log_time_per_output_token_ms",
        )
    ]
)
_SCRATCH_WIDTH = len(_SCRATCH_COLUMNS)
_MEMORY_USE = GLOBAL_FEATURES.index("memory_use")
_MEAN_POWER_SHARE = GLOBAL_FEATURES.index("mean_power_share")


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
    """NODE_PHASE_FEATURES from a raw matrix [..., kernels, RAW_COLUMNS] (training's ablation
    of prefill + decode merged), written into `out` when given."""
    sums = np.add.reduce(raw[..., _SHARED_RAW], axis=-2)  # the kernels' time [s], energy [J]
    return phase_node_block(
        raw[..., 0], raw[..., _WORK], raw[..., _TIMES_AND_ENERGY], sums[..., 0], sums[..., 1], out
    )


def phase_node_block(
    executions: FloatArray,
    counts: FloatArray,
    timed: FloatArray,
    kernel_s: FloatArray,
    kernel_j: FloatArray,
    out: FloatArray | None = None,
) -> FloatArray:
    """NODE_PHASE_FEATURES [..., kernels, F] of kernels' `executions` [..., kernels], Work
    `counts` [..., kernels, WORK_FIELDS] and `timed` [..., kernels, 5] (time, compute, memory,
    network [s], GPU energy [J]), with `kernel_s` and `kernel_j` [...] the kernels' time [s]
    and energy [J] summed (what the shares are of); any leading axes (phases, requests), any
    strides. Written into `out` when given."""
    fields = len(WORK_FIELDS)
    at = 1 + fields + len(SHAPE_FIELDS) + 5
    block = np.empty((*executions.shape, len(NODE_PHASE_FEATURES))) if out is None else out
    # Every log1p feature in one call, computed in place: counts, per-execution shapes, times
    # [µs], energy [mJ]. A kernel with no execution (decode of a one-token output) has all
    # counts 0: dividing by max(executions, 1) gives its per-execution shapes 0, the others
    # exactly count/executions.
    block[..., 0] = executions
    block[..., 1 : 1 + fields] = counts
    per_execution = np.maximum(executions, _ONE)[..., None]
    for into, (start, stop) in _SHAPE_RUNS:  # runs of adjacent Work fields, no gather
        np.divide(
            counts[..., start:stop], per_execution, out=block[..., into : into + stop - start]
        )
    np.multiply(timed, _TO_US_AND_MJ, out=block[..., at - 5 : at])
    np.log1p(block[..., :at], out=block[..., :at])
    # The bound limb: the first largest of compute, memory, network [s] (as np.argmax picks),
    # none when no limb is positive. Found with a 0 placed before the limbs (in the column the
    # energy share fills next): argmax picks it, a row of zeros, exactly then.
    limbs = block[..., at + 1 : at + 5]
    limbs[..., 0] = 0.0
    limbs[..., 1:] = timed[..., 1:4]
    limbs[..., 1:] = _ONE_HOT_OR_NONE[limbs.argmax(axis=-1)]
    # Shares of the phase's sums; a phase without kernel time (no decode step) has sums 0 and
    # every kernel's value 0, which the smallest positive divisor turns into shares 0.
    for column, (timed_column, total) in enumerate(((0, kernel_s), (4, kernel_j)), at):
        divisor = np.maximum(total, _SMALLEST)[..., None]
        np.divide(timed[..., timed_column], divisor, out=block[..., column])
    return block


def _global_matrix(
    estimates: WorkloadEstimates, totals: FloatArray, encodings: Sequence[ContextEncoding]
) -> FloatArray:
    """[N, GLOBAL_FEATURES]: the global features of each request, in few array operations (one
    request costs what many do): the context's fixed values, then every logged value gathered
    in one scratch matrix, logged in two calls and scattered into place in one."""
    plans = estimates.plans
    rows = plans.rows
    sizes = estimates.sizes  # [N, (batch, prompt, output)]
    n = sizes.shape[0]
    out = np.empty((n, len(GLOBAL_FEATURES)))
    if len(encodings) == 1:  # every row's fixed values in place, broadcast
        out[:] = encodings[0].global_row
    else:
        out[:] = np.array([encoding.global_row for encoding in encodings])[plans.context]
    phase_s, phase_j = estimates.phase_s, estimates.phase_gpu_j
    gpu_j = phase_j[0] + phase_j[1]
    # log: sizes, then the request's, prefill's and decode's energy [J] (floored at 1 µJ)
    scratch = np.empty((n, _SCRATCH_WIDTH))
    scratch[:, :3] = sizes
    scratch[:, 3] = gpu_j
    scratch[:, 4:6] = phase_j.T
    np.maximum(scratch[:, 3:6], _MIN_ENERGY_J, out=scratch[:, 3:6])
    np.log(scratch[:, :6], out=scratch[:, :6])
    # log1p: per phase (tensor FLOPs, memory bytes, network bytes), the phase and overhead
    # times [µs] and the time per output token [ms]
    phase_totals = np.add.reduce(totals, axis=2) @ _GLOBAL_TOTALS  # [2, N, 3]
    scratch[:, 6:12] = phase_totals.transpose(1, 0, 2).reshape(n, 6)
    np.multiply(phase_s.T, _US_PER_S, out=scratch[:, 12:14])
    np.multiply(estimates.overhead_s.T, _US_PER_S, out=scratch[:, 14:16])
    # decode time over its steps [ms]; no decode step (steps 0, times 0): no time per token
    steps = np.subtract(sizes[:, 2], _ONE)
    tpot = scratch[:, 16]
    np.multiply(phase_s[1], _MS_PER_S, out=tpot)
    tpot /= np.maximum(steps, _ONE)
    tpot *= np.minimum(steps, _ONE)
    np.log1p(scratch[:, 6:], out=scratch[:, 6:])
    out[:, _SCRATCH_COLUMNS] = scratch
    memory_use = out[:, _MEMORY_USE]
    np.add(rows.weight_bytes, estimates.kv_cache_bytes, out=memory_use)
    memory_use /= rows.capacity_bytes
    drawn = phase_s[0] + phase_s[1]  # kernel time [s], then the energy at TDP [J] over it
    np.maximum(drawn, _MIN_KERNEL_S, out=drawn)
    drawn *= rows.held
    drawn *= rows.tdp_w
    np.divide(gpu_j, drawn, out=out[:, _MEAN_POWER_SHARE])
    return out
