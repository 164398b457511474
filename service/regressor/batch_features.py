"""`request_features` for many requests of one model on one deployment at once.

Built from a core BatchEstimate with the same node-block function as one request
(`phase_node_block_of`, over [phases, requests, kernels]) and the global features in array form;
tests hold every value equal to `request_features` of each request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.architecture import ModelArchitecture
from service.core.estimate_many import BatchEstimate
from service.core.work import WORK_FIELDS
from service.core.workload import Deployment
from service.regressor.features import (
    MEMORY_WORK_FIELDS,
    MIN_ENERGY_J,
    RAW_COLUMNS,
    US_PER_S,
    WORKLOAD_AT,
    RequestFeatures,
    deployment_values,
    graph_arrays,
    phase_node_block_of,
)

FloatArray = npt.NDArray[np.float64]
_FIELD = {name: i for i, name in enumerate(WORK_FIELDS)}
_MEMORY = [_FIELD[f] for f in MEMORY_WORK_FIELDS]


@dataclass(frozen=True, slots=True)
class BatchFeatures:
    """RequestFeatures of N requests on one kernel graph, stacked.

    Attributes:
        node_x: [N, nodes, node features]; adjacency: [nodes, nodes] (shared);
        global_x: [N, global features]; log_analytical_j: [N, 2].
    """

    node_x: FloatArray
    adjacency: FloatArray
    global_x: FloatArray
    log_analytical_j: FloatArray

    @classmethod
    def of_one(cls, features: RequestFeatures) -> BatchFeatures:
        """One request's features as a batch of one."""
        return cls(
            features.node_x[None],
            features.adjacency,
            features.global_x[None],
            features.log_analytical_j[None],
        )

    def item(self, j: int) -> RequestFeatures:
        return RequestFeatures(
            self.node_x[j], self.adjacency, self.global_x[j], self.log_analytical_j[j]
        )


def batch_features(
    arch: ModelArchitecture, deployment: Deployment, batch: BatchEstimate
) -> BatchFeatures:
    """The features of every workload of `batch` (priced for `arch` on `deployment`)."""
    static, adjacency = graph_arrays(arch, deployment)
    arrays = batch.arrays
    totals = batch.totals()  # [2, N, K, WORK_FIELDS]
    raw = np.concatenate(
        [
            arrays.executions[..., None],
            totals,
            np.stack(
                [arrays.time_s, arrays.compute_s, arrays.memory_s, arrays.network_s, arrays.gpu_j],
                axis=-1,
            ),
        ],
        axis=-1,
    )
    assert raw.shape[-1] == len(RAW_COLUMNS)
    prefill, decode = phase_node_block_of(raw)
    n = prefill.shape[0]
    node_x = np.concatenate([np.broadcast_to(static, (n, *static.shape)), prefill, decode], axis=2)
    phase_gpu_j = batch.phase_gpu_j
    log_phase_j = np.log(np.maximum(phase_gpu_j, MIN_ENERGY_J)).T
    return BatchFeatures(
        node_x=node_x,
        adjacency=adjacency,
        global_x=_global_matrix(arch, deployment, batch, totals),
        log_analytical_j=np.ascontiguousarray(log_phase_j),
    )


def _global_matrix(
    arch: ModelArchitecture, deployment: Deployment, batch: BatchEstimate, totals: FloatArray
) -> FloatArray:
    """[N, GLOBAL_FEATURES]: features.`_global_vector` of each request, in array form."""
    fixed = np.array(deployment_values(arch, deployment))
    workloads = np.array(
        [(w.batch_size, w.prompt_tokens, w.output_tokens) for w in batch.workloads],
        dtype=np.float64,
    ).reshape(-1, 3)
    required = batch.plan.weight_bytes_per_gpu + batch.kv_cache_bytes
    sums = np.stack(
        [
            totals[..., _FIELD["tensor_flops"]].sum(axis=-1),
            totals[..., _MEMORY].sum(axis=(-2, -1)),
            totals[..., _FIELD["network_bytes"]].sum(axis=-1),
        ],
        axis=-1,
    )  # [2, N, 3]
    phase_s, phase_j, overhead_s = batch.phase_s, batch.phase_gpu_j, batch.overhead_s
    gpu_j = phase_j[0] + phase_j[1]
    kernel_s = phase_s[0] + phase_s[1]
    steps = workloads[:, 2] - 1.0
    per_token_s = np.divide(phase_s[1], steps, out=np.zeros_like(steps), where=steps > 0)
    gpu_count = deployment.parallelism.gpu_count
    columns = [
        np.broadcast_to(fixed[:WORKLOAD_AT], (workloads.shape[0], WORKLOAD_AT)),
        np.log(workloads),
        np.broadcast_to(fixed[WORKLOAD_AT:], (workloads.shape[0], fixed.shape[0] - WORKLOAD_AT)),
        (required / batch.capacity_bytes_per_gpu)[:, None],
        np.log1p(sums[0]),
        np.log1p(sums[1]),
        np.log(np.maximum(np.stack([gpu_j, phase_j[0], phase_j[1]], axis=1), MIN_ENERGY_J)),
        np.log1p(US_PER_S * np.stack([phase_s[0], phase_s[1], overhead_s[0], overhead_s[1]], 1)),
        np.log1p(1e3 * per_token_s)[:, None],
        (gpu_j / (np.maximum(kernel_s, 1e-12) * gpu_count * deployment.gpu.tdp_w))[:, None],
    ]
    result: FloatArray = np.concatenate(columns, axis=1)
    return result
