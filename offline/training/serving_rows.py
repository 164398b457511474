"""aiconfigurator's serving runs (H100/H200; vLLM, SGLang, TensorRT-LLM) as time-only training
rows of the regressor: each run is the request the service prices for it
(silicon_rows.silicon_request: one request joining the run's concurrency, its engine's
profile), encoded by the same `dataset.encoded_row` as the ML.ENERGY rows, with its measured
TPOT and no energy (the runs measure none: the energy loss masks them).

Profiles: the shipped `vllm`, `sglang`, `trtllm` ones, or per fold the profile refitted as
silicon_levels refits it without the fold's group (`gpu_fold_profile`: kernel tables and runs
of that GPU left out; `family_fold_profile`: runs of that family left out). A run whose engine
is held out is priced with the profile the service gives an engine without measurements
(`DEFAULT_ENGINE`), as serving_validation prices it.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from offline.fitting.engine_gemm import gemm_samples
from offline.fitting.engine_moe import block_fp8_expert_bytes
from offline.fitting.engine_profiles import (
    ENGINES,
    Run,
    engine_runs,
    kernel_coefficients,
    run_slopes,
    table_folder,
)
from offline.fitting.silicon_levels import SOURCE, refitted_profile
from offline.fitting.silicon_rows import SILICON_CSV, point_estimator, silicon_request, unpriceable
from offline.training.dataset import MeasuredRequest, TrainingRow, encoded_row
from service.catalog import load_gpu_catalog
from service.catalog.engines import DEFAULT_ENGINE, load_engine_coefficients
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError
from service.errors import ServiceError

Profiles = Mapping[str, CostModelCoefficients]
"""Coefficients per aiconfigurator engine ("vllm", "sglang", "trtllm")."""


def serving_runs(data_dir: Path) -> list[Run]:
    """Every aggregated run the service can price the layout of (runs spanning nodes too:
    the service prices them; only the profile fits keep to one node)."""
    with (data_dir / SILICON_CSV).open(newline="", encoding="utf-8") as handle:
        return [
            Run(line, row)
            for line, row in enumerate(csv.DictReader(handle), start=2)
            if not unpriceable(row)
        ]


def shipped_profiles() -> dict[str, CostModelCoefficients]:
    coefficients = load_engine_coefficients()
    return {engine: coefficients[engine] for engine in ENGINES}


def gpu_fold_profile(data_dir: Path, engine: str, gpu: str) -> CostModelCoefficients:
    """`engine`'s profile refitted without `gpu` (silicon_levels' `gpu` level): kernel
    efficiencies on the other GPUs' tables, decode overheads and TTFT terms on the other GPUs'
    one-node runs; the shared coefficients are the shipped ones."""
    shared = load_engine_coefficients()[DEFAULT_ENGINE]
    samples = gemm_samples(data_dir, engine, load_gpu_catalog())
    expert_bytes = block_fp8_expert_bytes(data_dir, engine, table_folder(gpu))
    kept = np.array(samples.gpu_id) != gpu
    without = kernel_coefficients(shared, samples.subset(kept), expert_bytes)
    slopes = run_slopes(engine_runs(data_dir, engine), engine, without)
    return refitted_profile(slopes.subset(np.array(slopes.gpu) != gpu), without)


def family_fold_profile(data_dir: Path, engine: str, family: str) -> CostModelCoefficients:
    """`engine`'s profile refitted without `family`'s runs (silicon_levels' `family` level):
    the kernel efficiencies, fitted on tables that hold no model, kept; decode overheads and
    TTFT terms on the other families' one-node runs."""
    shared = load_engine_coefficients()[DEFAULT_ENGINE]
    samples = gemm_samples(data_dir, engine, load_gpu_catalog())
    zero = kernel_coefficients(shared, samples, block_fp8_expert_bytes(data_dir, engine))
    slopes = run_slopes(engine_runs(data_dir, engine), engine, zero)
    return refitted_profile(slopes.subset(np.array(slopes.family) != family), zero)


def load_serving_rows(
    data_dir: Path, profiles: Profiles | None = None, held_out_engine: str | None = None
) -> tuple[list[TrainingRow], list[str]]:
    """The serving runs as training rows, each encoded with its engine's profile in `profiles`
    (default: the shipped ones; `held_out_engine`'s runs with the default engine's profile),
    and why the others were left out."""
    profiles = dict(profiles or shipped_profiles())
    if held_out_engine is not None:
        profiles[held_out_engine] = load_engine_coefficients()[DEFAULT_ENGINE]
    estimator = point_estimator(coefficients={**load_engine_coefficients(), **profiles})
    rows: list[TrainingRow] = []
    skipped: list[str] = []
    for run in serving_runs(data_dir):
        ref = f"{SILICON_CSV}:{run.line}"
        engine = run.row["backend"]
        try:
            resolved = estimator.resolve(silicon_request(run.row, engine))
            measured = MeasuredRequest(
                ref,
                SOURCE,
                engine,
                estimator.family_of(resolved),
                resolved.model_id,
                math.nan,
                float(run.row["silicon_tpot_ms"]) / 1e3,
            )
            rows.append(
                encoded_row(
                    measured,
                    resolved.architecture,
                    resolved.workload,
                    resolved.deployment,
                    profiles[engine],
                )
            )
        except (CostModelError, ServiceError) as error:
            skipped.append(f"{ref}: {error}")
    return rows, skipped
