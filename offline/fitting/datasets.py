"""Loaders for the public measurements in ``../shared/data`` (read in place, never copied).

Re-exports the per-source loaders and adds ``data_source_digests`` so fitted artefacts can record
exactly which bytes they were fitted to. Cite each source (its folder's LICENSE) in anything
derived.
"""

from __future__ import annotations

from pathlib import Path

from offline.fitting.datasets_common import (
    DEFAULT_DATA_DIR,
    KNOWN_GPU_IDS,
    resolve_data_dir,
    sha256_file,
)
from offline.fitting.energy_leaderboard import (
    MLENERGY_V2_CSV,
    MLENERGY_V3_CSV,
    PROMPT_TOKENS_BY_TASK,
    EnergyMeasurement,
    MlEnergyData,
    load_mlenergy,
    read_mlenergy,
)
from offline.fitting.kernel_profiles import (
    CollectiveTimeMeasurement,
    KernelTimeMeasurement,
    load_vidur_collectives,
    load_vidur_kernels,
    vidur_kernel_files,
    vidur_network_files,
)
from offline.fitting.phase_times import (
    SPLITWISE_CSV,
    PhaseTimeMeasurement,
    load_splitwise,
)
from offline.fitting.request_trace import AZURE_TRACE_CSVS, AzureTraceKind, load_azure_trace

__all__ = [
    "DEFAULT_DATA_DIR",
    "KNOWN_GPU_IDS",
    "PROMPT_TOKENS_BY_TASK",
    "AzureTraceKind",
    "CollectiveTimeMeasurement",
    "EnergyMeasurement",
    "KernelTimeMeasurement",
    "MlEnergyData",
    "PhaseTimeMeasurement",
    "data_source_csvs",
    "data_source_digests",
    "load_azure_trace",
    "load_mlenergy",
    "load_splitwise",
    "load_vidur_collectives",
    "load_vidur_kernels",
    "read_mlenergy",
]


def data_source_csvs(data_dir: Path = DEFAULT_DATA_DIR) -> list[str]:
    """Relative paths (posix) of every CSV file the loaders read, sorted."""
    fixed = [MLENERGY_V2_CSV, MLENERGY_V3_CSV, SPLITWISE_CSV, *AZURE_TRACE_CSVS.values()]
    return sorted([*fixed, *vidur_kernel_files(data_dir), *vidur_network_files(data_dir)])


def data_source_digests(data_dir: Path = DEFAULT_DATA_DIR) -> dict[str, str]:
    """sha256 hex digest of every CSV file the loaders read, keyed by path relative to data_dir."""
    root = resolve_data_dir(data_dir)
    digests: dict[str, str] = {}
    for relative in data_source_csvs(root):
        path = root / relative
        if not path.is_file():
            raise FileNotFoundError(f"expected data file not found: {path}")
        digests[relative] = sha256_file(path)
    return digests
