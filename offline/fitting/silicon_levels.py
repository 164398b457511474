"""aiconfigurator's serving runs priced as the service prices them, each with its own engine's
profile refitted without the run's group, as held-out rows of the evidence levels.

The service prices a vLLM, SGLang or TensorRT-LLM request with that engine's profile (`vllm`,
`sglang`, `trtllm`: kernel efficiencies on the engine's GEMM and MoE tables, decode host
overheads, and the TTFT wave share and per-request host time, all fitted on these very runs;
engine_profiles.py). Each run is priced here through `Estimator.price` with that profile
refitted as `engine_profiles.fit_engine` fits it, less the run's group:
- `family` (or `precision`, where the service places the run's case there): H100 runs, the
  decode overheads and TTFT terms refitted without the runs of the model family (precision);
  the kernel efficiencies, fitted on GEMM tables that hold no model, kept;
- `gpu`: H100 and H200 runs, everything refitted without that GPU's runs and kernel tables (the
  service places H200 here; H100 held out as ML.ENERGY's A100 and H100 rows are);
- `engine`: H100 runs, the overheads and TTFT terms refitted without the runs of their engine
  version (runs without a recorded version are one group): what a version never measured
  meets, priced with the profile of the versions that were (service/catalog/engine_versions.py).
The shared coefficients under each profile (attention, power) are the shipped ones. Runs are
read as one request joining the run's concurrency (silicon_rows.silicon_request); the fits use
single-node runs only (engine_profiles.engine_runs), runs spanning nodes are priced too.
Quantities: measured TTFT against `prefill_s` (`ttft`), TPOT against
`time_per_output_token_s`, TTFT + (osl - 1) x TPOT against `total_s`.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

from offline.fitting.cross_validation import overhead_values, with_roofline_values
from offline.fitting.engine_gemm import gemm_samples
from offline.fitting.engine_moe import block_fp8_expert_bytes
from offline.fitting.engine_profiles import (
    ENGINES,
    ONE_NODE_GPUS,
    Run,
    Slopes,
    fit_engine_overheads,
    fit_ttft_terms,
    kernel_coefficients,
    run_slopes,
    table_folder,
)
from offline.fitting.held_out_rows import HeldOutRow
from offline.fitting.silicon_rows import (
    PRECISIONS,
    SILICON_CSV,
    SILICON_GPUS,
    point_estimator,
    silicon_request,
    unpriceable,
)
from service.catalog import load_gpu_catalog
from service.catalog.engines import DEFAULT_ENGINE, load_engine_coefficients
from service.core.coefficients import CostModelCoefficients
from service.errors import ServiceError
from service.pricing.evidence import Case, evidence_level

SOURCE = "aiconfigurator-silicon"
_Mask = npt.NDArray[np.bool_]
UNVERSIONED = "version not recorded"
_OWN_DIMENSION = {"family": "family", "custom": "family", "precision": "precision"}
"""Levels a run on a fitted GPU may take, and the case field its fold leaves out."""


def silicon_held_out(
    data_dir: Path, fitted_on: Mapping[str, frozenset[str]]
) -> tuple[list[HeldOutRow], Counter[str]]:
    """Held-out rows (ttft, tpot, total) of every priceable aggregated run at each level of
    the module doc, and the count of runs left out by reason."""
    skipped: Counter[str] = Counter()
    runs: list[Run] = []
    with (data_dir / SILICON_CSV).open(newline="", encoding="utf-8") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            reason = unpriceable(row)
            if reason:
                skipped[reason] += 1
            else:
                runs.append(Run(line, row))
    rows: list[HeldOutRow] = []
    for engine in ENGINES:
        own = [r for r in runs if r.row["backend"] == engine]
        engine_rows, refused = _engine_rows(data_dir, engine, own, fitted_on)
        rows += engine_rows
        if refused:
            skipped["refused by the service"] += refused
    return rows, skipped


def _engine_rows(
    data_dir: Path, engine: str, runs: list[Run], fitted_on: Mapping[str, frozenset[str]]
) -> tuple[list[HeldOutRow], int]:
    """`engine`'s runs at every level, and how many the service refuses."""
    shared = load_engine_coefficients()[DEFAULT_ENGINE]
    samples = gemm_samples(data_dir, engine, load_gpu_catalog())
    zero = kernel_coefficients(shared, samples, block_fp8_expert_bytes(data_dir, engine))
    slopes = run_slopes(runs, engine, zero)
    by_line = {r.line: r for r in runs}
    priced = [by_line[line] for line in slopes.lines]
    cases = [_case(r.row, engine, f) for r, f in zip(priced, slopes.family, strict=True)]
    levels = np.array([evidence_level(c, fitted_on) for c in cases])
    # (level, group, kernel coefficients, slopes, runs left out of the fit, runs priced)
    folds: list[tuple[str, str, CostModelCoefficients, Slopes, _Mask, _Mask]] = []
    for level, field in _OWN_DIMENSION.items():
        keys = np.array([getattr(c, field) for c in cases])
        for group in sorted(set(keys[levels == level].tolist())):
            out = keys == group
            folds.append((level, group, zero, slopes, out, out & (levels == level)))
    versions = np.array([r.row["backend_version"] or UNVERSIONED for r in priced])
    fitted_gpu = np.isin(levels, list(_OWN_DIMENSION))
    for version in sorted(set(versions[fitted_gpu].tolist())):
        out = versions == version
        folds.append(("engine", f"{engine} {version}", zero, slopes, out, out & fitted_gpu))
    kernel_gpus = np.array(samples.gpu_id)
    for gpu in sorted({c.gpu for c in cases}):
        expert_bytes = block_fp8_expert_bytes(data_dir, engine, table_folder(gpu))
        without = kernel_coefficients(shared, samples.subset(kernel_gpus != gpu), expert_bytes)
        gpu_slopes = run_slopes(runs, engine, without)
        out = np.array(gpu_slopes.gpu) == gpu
        folds.append(("gpu", gpu, without, gpu_slopes, out, out))
    rows: list[HeldOutRow] = []
    for level, group, kernels, fold_slopes, out, test in folds:
        one_node = np.array([_gpus(by_line[x].row) <= ONE_NODE_GPUS for x in fold_slopes.lines])
        profile = refitted_profile(fold_slopes.subset(one_node & ~out), kernels)
        tested = [by_line[x] for x, t in zip(fold_slopes.lines, test, strict=True) if t]
        rows += _priced(level, group, engine, profile, tested)
    return rows, len(runs) - len(slopes.lines)


def refitted_profile(train: Slopes, zero: CostModelCoefficients) -> CostModelCoefficients:
    """The profile `engine_profiles.fit_engine` fits, on `train`'s runs: `zero`'s kernel
    efficiencies with the decode overheads and TTFT terms fitted on them."""
    prefill_s = load_engine_coefficients()[DEFAULT_ENGINE].roofline.prefill_overhead_s
    overheads = fit_engine_overheads(train, prefill_s)
    wave, request_s = fit_ttft_terms(train, overheads)
    values = {
        **overhead_values(overheads),
        "ttft_wave_share": wave,
        "request_overhead_s": request_s,
    }
    return with_roofline_values(zero, values)


def _priced(
    level: str,
    group: str,
    engine: str,
    profile: CostModelCoefficients,
    runs: list[Run],
) -> list[HeldOutRow]:
    """`runs` priced by the service with `profile` as `engine`'s, as rows of `level`."""
    estimator = point_estimator(coefficients={**load_engine_coefficients(), engine: profile})
    results = estimator.price([silicon_request(r.row, engine) for r in runs])
    rows: list[HeldOutRow] = []
    for run, result in zip(runs, results, strict=True):
        if isinstance(result, ServiceError):
            continue  # refused under the full profile too (counted there)
        latency = result.document.as_dict()["latency"]
        case = _case(run.row, engine, estimator.model_family(run.row["model_path"]))
        ttft_s = float(run.row["silicon_ttft_ms"]) / 1e3
        tpot_s = float(run.row["silicon_tpot_ms"]) / 1e3
        measured = {
            "ttft": ttft_s,
            "tpot": tpot_s,
            "total": ttft_s + (int(run.row["osl"]) - 1) * tpot_s,
        }
        predicted = {
            "ttft": latency["prefill_s"],
            "tpot": latency["time_per_output_token_s"],
            "total": latency["total_s"],
        }
        values = (case.gpu, case.engine, case.precision, case.family)
        ref = f"{SILICON_CSV}:{run.line}"
        rows += [
            HeldOutRow(level, group, q, SOURCE, ref, measured[q], predicted[q], *values)
            for q in measured
            if measured[q] > 0 and predicted[q] > 0
        ]
    return rows


def _case(row: dict[str, str], engine: str, family: str) -> Case:
    """The service's case of a run priced with `engine`'s own profile."""
    gpu, precision = SILICON_GPUS[row["system"]], PRECISIONS[row["precision"]]
    return Case(gpu=gpu, vendor="NVIDIA", engine=engine, precision=precision, family=family)


def _gpus(row: dict[str, str]) -> int:
    return int(row["tp_size"]) * int(row["attention_dp_size"] or 1)
