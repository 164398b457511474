"""NVIDIA aiconfigurator's measured per-kernel tables (``aiconfigurator/kernels/``, Apache-2.0).

Layout: ``<gpu>/<op>/<engine>/<engine version>/<table>_perf.parquet``, one measured kernel per
row, ``latency`` in milliseconds; the H200 vLLM 0.22.0 tables also carry the board's mean
``power`` and its ``power_limit`` [W] over the timed loop (aiconfigurator's
``collector/helper.py`` ``benchmark_with_power``). A table is read into plain column lists so the
pricing functions (offline.validation.kernel_pricing) take hand-written rows as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline.fitting.datasets_common import DEFAULT_DATA_DIR, resolve_data_dir

KERNELS_DIR = "aiconfigurator/kernels"

GPU_IDS: dict[str, str] = {
    # aiconfigurator's system folder -> the project's GPU catalogue id (the tables' `device`
    # column names the part: "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3",
    # "NVIDIA H200", "NVIDIA L40S").
    "a100_sxm": "A100-SXM4-80GB",
    "h100_sxm": "H100-SXM5-80GB",
    "h200_sxm": "H200-SXM-141GB",
    "l40s": "L40S",
}

Columns = dict[str, list[Any]]


@dataclass(frozen=True, slots=True)
class KernelTableFile:
    """Where one table sits: GPU folder, op folder, engine, engine version, table name."""

    relative: str  # path below the data directory, for provenance
    gpu: str  # aiconfigurator folder name, e.g. "h200_sxm"
    op_folder: str  # e.g. "gemm", "attention", "comm"
    engine: str  # "vllm", "sglang", "trtllm"; "nccl" for the NCCL tests
    version: str
    table: str  # file stem, e.g. "gemm_perf"

    @property
    def gpu_id(self) -> str:
        return GPU_IDS[self.gpu]


@dataclass(frozen=True, slots=True)
class KernelTable:
    """One table's rows as columns (``latency`` in ms; ``power`` in W where measured)."""

    file: KernelTableFile
    columns: Columns

    @property
    def rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def column(self, name: str, default: Any = None) -> list[Any]:
        """The column `name`, or `default` repeated where the table lacks it."""
        if name in self.columns:
            return self.columns[name]
        return [default] * self.rows


def kernel_table_files(
    data_dir: Path = DEFAULT_DATA_DIR,
    *,
    gpus: tuple[str, ...] = (),
    tables: tuple[str, ...] = (),
) -> list[KernelTableFile]:
    """Every table below ``aiconfigurator/kernels``, sorted; `gpus`/`tables` filter by folder
    name and file stem (empty: all)."""
    root = resolve_data_dir(data_dir)
    base = root / KERNELS_DIR
    found = []
    for path in sorted(base.glob("*/*/*/*/*.parquet")):
        gpu, op_folder, engine, version = path.relative_to(base).parts[:4]
        if gpu not in GPU_IDS or (gpus and gpu not in gpus):
            continue
        if tables and path.stem not in tables:
            continue
        found.append(
            KernelTableFile(
                relative=path.relative_to(root).as_posix(),
                gpu=gpu,
                op_folder=op_folder,
                engine=engine,
                version=version,
                table=path.stem,
            )
        )
    if not found:
        raise FileNotFoundError(f"no aiconfigurator kernel tables under {base}")
    return found


def read_kernel_table(
    data_dir: Path, file: KernelTableFile, *, max_rows: int | None = None
) -> KernelTable:
    """The rows of `file`; with `max_rows`, an evenly strided subset of at most that many."""
    import pyarrow.parquet as pq  # only the offline tools need pyarrow

    table = pq.read_table(resolve_data_dir(data_dir) / file.relative)
    if max_rows is not None and table.num_rows > max_rows:
        step = -(-table.num_rows // max_rows)  # ceiling division keeps at most max_rows
        table = table.take(list(range(0, table.num_rows, step)))
    columns: Columns = {name: table.column(name).to_pylist() for name in table.column_names}
    return KernelTable(file, columns)


def table_row_count(data_dir: Path, file: KernelTableFile) -> int:
    """Rows of `file`, from its parquet footer (the table itself is not read)."""
    import pyarrow.parquet as pq

    return int(pq.read_metadata(resolve_data_dir(data_dir) / file.relative).num_rows)
