"""Fit the roofline's achievable fractions and launch cost on Vidur's per-kernel times.

Each Vidur record is one kernel of one layer on one tensor-parallel shard at a token count.
The core counts its work (so fitting and serving share one definition of every kernel); the
fit then finds the efficiencies and launch cost that make the roofline time match, in log
space with a robust loss so a few odd profiles do not pull the whole fit.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import least_squares

from offline.fitting.datasets import CollectiveTimeMeasurement, KernelTimeMeasurement
from service.catalog import GpuCatalog, ModelCatalog
from service.core.counts import AttentionSpan, PassShape
from service.core.dtypes import DType
from service.core.graph import build_kernel_graph
from service.core.kernel_work import kernel_work
from service.core.roofline import STREAMING_KINDS
from service.core.shards import shard_shapes
from service.core.workload import Deployment, Parallelism, Precision

FloatArray = npt.NDArray[np.float64]
VIDUR_PRECISION = Precision(DType.FP16, DType.FP16, DType.FP16)  # Vidur profiles in fp16
GEMM_TILE_M = 64  # CUTLASS/cuBLAS small-M threadblock tile height on Ampere and Hopper


@dataclass(frozen=True, slots=True)
class KernelSamples:
    """Per record: seconds each unit would need at its full published peak, and the measurement."""

    tensor_s: FloatArray
    cuda_core_s: FloatArray
    special_function_s: FloatArray
    memory_s: FloatArray
    streaming: npt.NDArray[np.bool_]
    measured_s: FloatArray
    family: list[str]
    gpu_id: list[str]
    kernel: list[str]

    def subset(self, mask: npt.NDArray[np.bool_]) -> KernelSamples:
        pick = np.flatnonzero(mask)
        return KernelSamples(
            self.tensor_s[pick],
            self.cuda_core_s[pick],
            self.special_function_s[pick],
            self.memory_s[pick],
            self.streaming[pick],
            self.measured_s[pick],
            [self.family[i] for i in pick],
            [self.gpu_id[i] for i in pick],
            [self.kernel[i] for i in pick],
        )


def kernel_samples(
    records: list[KernelTimeMeasurement],
    models: ModelCatalog,
    gpus: GpuCatalog,
    per_group: int = 24,
) -> KernelSamples:
    """Ideal unit times of a subsample of `records` (at most `per_group` token counts, spread
    log-uniformly, per model x GPU x TP x kernel)."""
    groups: dict[tuple[str, str, int, str], list[KernelTimeMeasurement]] = defaultdict(list)
    for r in records:
        groups[(r.model_id, r.gpu_id, r.tensor_parallel, r.kernel)].append(r)
    cols: dict[str, list[float]] = defaultdict(list)
    family, gpu_ids, kernels = [], [], []
    for (model_id, gpu_id, tp, kernel), rows in sorted(groups.items()):
        record = models.get(model_id)
        arch = record.require_architecture()
        gpu = gpus.get(gpu_id).spec
        deployment = Deployment(gpu, Parallelism(tensor=tp), VIDUR_PRECISION)
        shapes = shard_shapes(arch, deployment)
        graph = build_kernel_graph(arch, flash_attention=True, tensor_group=tp, pipeline_stages=1)
        node = next((n for n in graph.nodes + graph.step_nodes if n.name == kernel), None)
        if node is None:
            continue
        rows = sorted(rows, key=lambda r: r.num_tokens)
        step = max(1, len(rows) // per_group)
        for r in rows[::step]:
            span = AttentionSpan(r.num_tokens, r.num_tokens, r.num_tokens)
            shape = PassShape(r.num_tokens, 1, 1, {"full": span}, GEMM_TILE_M)
            w = kernel_work(node, arch, shapes, shape)
            cols["tensor"].append(w.padded_tensor_flops / gpu.gemm_peak_flops_per_s("fp16"))
            cols["cuda"].append(w.cuda_core_ops / gpu.cuda_core_fp32_flops_per_s)
            cols["sfu"].append(w.special_function_ops / gpu.special_function_ops_per_s)
            cols["memory"].append(w.memory_bytes / gpu.memory_bandwidth_bytes_per_s)
            cols["streaming"].append(float(node.kind in STREAMING_KINDS))
            cols["measured"].append(r.time_s)
            family.append(record.family)
            gpu_ids.append(gpu_id)
            kernels.append(kernel)
    return KernelSamples(
        np.array(cols["tensor"]),
        np.array(cols["cuda"]),
        np.array(cols["sfu"]),
        np.array(cols["memory"]),
        np.array(cols["streaming"]) > 0.5,
        np.array(cols["measured"]),
        family,
        gpu_ids,
        kernels,
    )


def predict_kernel_s(samples: KernelSamples, params: FloatArray) -> FloatArray:
    """Roofline time with efficiencies (tensor, cuda, sfu, streaming memory, elementwise
    memory) and launch cost `params`."""
    e_t, e_c, e_s, e_m, e_e, launch = params
    memory = samples.memory_s / np.where(samples.streaming, e_m, e_e)
    unit = np.stack(
        [
            samples.tensor_s / e_t,
            samples.cuda_core_s / e_c,
            samples.special_function_s / e_s,
            memory,
        ]
    )
    return np.asarray(unit.max(axis=0) + launch, dtype=np.float64)


def fit_kernel_efficiencies(samples: KernelSamples) -> dict[str, float]:
    """Efficiencies in (0.02, 1] and launch cost in [0, 50 us] minimising robust log error."""

    def residuals(params: FloatArray) -> FloatArray:
        return np.log(predict_kernel_s(samples, params) / samples.measured_s)

    start = np.array([0.7, 0.5, 0.5, 0.8, 0.5, 5e-6])
    bounds = (np.array([0.05, 0.02, 0.02, 0.05, 0.05, 0.0]), np.array([1, 1, 1, 1, 1, 5e-5]))
    fit = least_squares(
        residuals,
        start,
        bounds=bounds,
        loss="soft_l1",
        f_scale=0.1,
        x_scale=np.array([0.1, 0.1, 0.1, 0.1, 0.1, 1e-6]),
    )
    return dict(zip(KERNEL_PARAMETERS, (float(v) for v in fit.x), strict=True))


KERNEL_PARAMETERS = (
    "tensor_efficiency",
    "cuda_core_efficiency",
    "special_function_efficiency",
    "memory_efficiency",
    "elementwise_memory_efficiency",
    "kernel_launch_s",
)


def fit_collectives(
    records: list[CollectiveTimeMeasurement], gpus: GpuCatalog, launch_s: float
) -> tuple[dict[str, float], FloatArray, FloatArray]:
    """Network efficiency and per-step latency from intra-node NVLink all-reduces.

    Returns the fitted values and (predicted, measured) seconds for the report.
    """
    rows = [
        r
        for r in records
        if r.collective == "all_reduce"
        and r.devices_per_node == r.num_workers
        and r.num_workers > 1
        and r.topology.endswith("_dgx")
    ]
    n = np.array([r.num_workers for r in rows], dtype=np.float64)
    link = np.array([gpus.get(r.gpu_id).spec.interconnect_bandwidth_bytes_per_s for r in rows])
    ideal_s = 2.0 * (n - 1) / n * np.array([r.size_bytes for r in rows]) / link
    steps = 2.0 * (n - 1)
    measured = np.array([r.time_s for r in rows])

    def predict(params: FloatArray) -> FloatArray:
        efficiency, latency = params
        return np.asarray(ideal_s / efficiency + steps * latency + launch_s, dtype=np.float64)

    fit = least_squares(
        lambda p: np.log(predict(p) / measured),
        np.array([0.7, 5e-6]),
        bounds=([0.05, 0.0], [1.0, 1e-4]),
        loss="soft_l1",
        f_scale=0.1,
        x_scale=np.array([0.1, 1e-6]),
    )
    values = {"network_efficiency": float(fit.x[0]), "collective_step_latency_s": float(fit.x[1])}
    return values, predict(fit.x), measured
