"""Each serving engine's GEMM efficiencies, fitted on aiconfigurator's per-engine GEMM tables.

aiconfigurator (NVIDIA, Apache-2.0) times every GEMM shape an engine runs with the engine's own
kernels (SGLang's sgl-kernel, TRT-LLM's PyTorch flow, vLLM's torch linear and its fp8 paths):
``kernels/<gpu>/gemm/<engine>/<version>/gemm_perf.parquet``, one row per (dtype, m, n, k) with
``latency`` in ms. Each row is priced as the core prices a GEMM - M padded to the tile height,
time = max(FLOPs / (tensor efficiency x dense peak), bytes / (memory efficiency x HBM bandwidth))
+ a fixed time per call - and the two efficiencies are fitted per engine in log space with a
robust loss, as `kernel_fit` fits them on Vidur. The fixed time is fitted too but not kept: it
is the table harness's per-call cost (one eager call per timing), which the service prices
with its own launch costs fitted on end-to-end runs (held at Vidur's launch cost instead, the
many small shapes drag the memory efficiency down to fit their fixed time). fp8 and fp8_block
rows run on the fp8 tensor cores (8-bit operands, 16-bit output); bfloat16 rows on the bf16
ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow.parquet as pq
from scipy.optimize import least_squares

from offline.fitting.datasets_common import resolve_data_dir
from offline.fitting.kernel_fit import GEMM_TILE_M
from offline.validation.kernel_tables import kernel_table_files
from service.catalog import GpuCatalog

FloatArray = npt.NDArray[np.float64]
GEMM_GPUS = ("h100_sxm", "h200_sxm")
"""The tables' GPU folders (offline.validation.kernel_tables.GPU_IDS): the serving runs' GPUs."""
_DTYPES = {"bfloat16": ("bf16", 2.0), "fp8": ("fp8", 1.0), "fp8_block": ("fp8", 1.0)}
"""Table dtype -> (tensor-core peak key, operand bytes per element)."""
OUTPUT_BYTES = 2.0  # bf16 output in every table
ROWS_PER_TABLE = 4000  # an even subsample: 100k rows per table fit no better and far slower


@dataclass(frozen=True, slots=True)
class GemmSamples:
    """Per GEMM: seconds at the full dense peak and at the full HBM bandwidth, measured
    seconds, and the GPU id and engine version it was measured on."""

    tensor_s: FloatArray
    memory_s: FloatArray
    measured_s: FloatArray
    gpu_id: list[str]
    version: list[str]

    def subset(self, mask: npt.NDArray[np.bool_]) -> GemmSamples:
        pick = np.flatnonzero(mask)
        return GemmSamples(
            self.tensor_s[pick],
            self.memory_s[pick],
            self.measured_s[pick],
            [self.gpu_id[i] for i in pick],
            [self.version[i] for i in pick],
        )


def gemm_tables(data_dir: Path, engine: str) -> list[tuple[str, str, Path]]:
    """(GPU id, engine version, path) of `engine`'s GEMM tables on the GEMM_GPUS."""
    root = resolve_data_dir(data_dir)
    files = kernel_table_files(data_dir, gpus=tuple(GEMM_GPUS), tables=("gemm_perf",))
    return [
        (f.gpu_id, f.version, root / f.relative)
        for f in files
        if f.op_folder == "gemm" and f.engine == engine
    ]


def gemm_samples(data_dir: Path, engine: str, gpus: GpuCatalog) -> GemmSamples:
    """Ideal unit times and measurements of an even subsample of `engine`'s GEMM tables."""
    tensor, memory, measured, gpu_ids, versions = [], [], [], [], []
    for gpu_id, version, path in gemm_tables(data_dir, engine):
        spec = gpus.get(gpu_id).spec
        table = pq.read_table(path, columns=["gemm_dtype", "m", "n", "k", "latency"])
        rows = table.to_pydict()
        step = max(1, table.num_rows // ROWS_PER_TABLE)
        for i in range(0, table.num_rows, step):
            dtype = _DTYPES.get(rows["gemm_dtype"][i])
            if dtype is None or rows["latency"][i] <= 0:
                continue
            peak_key, operand_bytes = dtype
            m, n, k = (float(rows[c][i]) for c in ("m", "n", "k"))
            padded_m = np.ceil(m / GEMM_TILE_M) * GEMM_TILE_M
            tensor.append(2.0 * padded_m * n * k / spec.gemm_peak_flops_per_s(peak_key))
            moved = (m * k + k * n) * operand_bytes + m * n * OUTPUT_BYTES
            memory.append(moved / spec.memory_bandwidth_bytes_per_s)
            measured.append(rows["latency"][i] / 1e3)
            gpu_ids.append(gpu_id)
            versions.append(version)
    return GemmSamples(np.array(tensor), np.array(memory), np.array(measured), gpu_ids, versions)


def predict_gemm_s(samples: GemmSamples, efficiencies: FloatArray, launch_s: float) -> FloatArray:
    """Roofline GEMM time [s] at (tensor, memory) `efficiencies`."""
    e_t, e_m = efficiencies
    unit = np.maximum(samples.tensor_s / e_t, samples.memory_s / e_m)
    return np.asarray(unit + launch_s, dtype=np.float64)


GEMM_PARAMETERS = ("tensor_efficiency", "memory_efficiency", "gemm_call_s")


def fit_gemm_efficiencies(samples: GemmSamples) -> dict[str, float]:
    """`tensor_efficiency` and `memory_efficiency` in [0.05, 1] and the harness's time per
    call `gemm_call_s` in [0, 50 us] minimising robust log error."""
    fit = least_squares(
        lambda p: np.log(predict_gemm_s(samples, p[:2], p[2] * 1e-6) / samples.measured_s),
        np.array([0.7, 0.8, 3.0]),
        bounds=([0.05, 0.05, 0.0], [1.0, 1.0, 50.0]),
        loss="soft_l1",
        f_scale=0.1,
    )
    values = (float(fit.x[0]), float(fit.x[1]), float(fit.x[2]) * 1e-6)
    return dict(zip(GEMM_PARAMETERS, values, strict=True))
