"""aiconfigurator's measured serving runs (H100/H200; vLLM, SGLang, TensorRT-LLM) priced by the
shipped estimator, as held-out rows: none of them entered the fit.

Each aggregated row is one request (batch 1) joining a server at the row's concurrency
(shared/data/README.md). Every run is priced with the default profile (vllm-v1, fitted on
ML.ENERGY; the `sglang` and `trtllm` profiles are fitted on these very runs): SGLang and
TensorRT-LLM runs are then an engine priced with another engine's profile, as the service
prices a version it has no profile for, so their level is placed as if only vllm-v1 were
fitted on (`engine held out` on H100; the level the service would state for such a quote).
Each run's parallelism is the request's: tensor = tp_size, data = attention_dp_size, expert =
moe_ep_size on tp_size x attention_dp_size GPUs. Left out, and counted: disaggregated rows,
pipeline-parallel rows, models or layouts the service refuses.
Measured TTFT (queueing included) is compared with `prefill_s` as quantity `ttft`, the one a
serving quote's prefill is bounded by; TPOT with `time_per_output_token_s`, and
TTFT + (osl - 1) x TPOT with `total_s`.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

from offline.fitting.held_out_rows import HeldOutRow
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import DEFAULT_ENGINE, load_engine_coefficients
from service.catalog.gpus import GpuCatalog
from service.catalog.intervals import QUANTITIES, EvidenceIntervals, LevelInterval
from service.catalog.regions import load_region_catalog
from service.core.coefficients import CostModelCoefficients
from service.errors import ServiceError
from service.pricing.estimator import Estimator
from service.pricing.evidence import LEVELS, Case, evidence_level
from service.schemas.estimate_request import EstimateRequest

SILICON_CSV = "aiconfigurator/silicon_sample_h100_h200.csv"
SOURCE = "aiconfigurator-silicon"
SILICON_GPUS = {"h100_sxm": "H100-SXM5-80GB", "h200_sxm": "H200-SXM-141GB"}
# NVFP4 is not a precision the request takes; MXFP4 is the 4-bit float it has.
_PRECISIONS = {"": "bf16", "fp8": "fp8", "fp4": "mxfp4", "int4": "int4"}
_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")


def point_estimator(
    gpus: GpuCatalog | None = None,
    coefficients: dict[str, CostModelCoefficients] | None = None,
) -> Estimator:
    """The shipped estimator over the packaged catalogues (or `gpus`) and coefficients (or
    `coefficients` per engine profile), with intervals of ratio 1 at every level: only its
    point estimates are read here, so the intervals being fitted never depend on the ones
    committed before."""
    none = {
        (level, q): LevelInterval(level, level, 1.0, 1.0, 0, 0, 0.0)
        for level in LEVELS
        for q in QUANTITIES
    }
    fitted_on = {d: frozenset[str]() for d in ("vendor", "gpu", "engine", "precision", "family")}
    intervals = EvidenceIntervals(0.5, 0.5, fitted_on=fitted_on, intervals=none, backing={})
    return Estimator(
        gpus or load_gpu_catalog(),
        load_model_catalog(),
        load_region_catalog(),
        coefficients or load_engine_coefficients(),
        intervals=intervals,
    )


def silicon_held_out(
    data_dir: Path, fitted_on: dict[str, frozenset[str]]
) -> tuple[list[HeldOutRow], Counter[str]]:
    """Held-out rows (ttft, tpot, total) of every priceable aggregated run, priced by
    `point_estimator`, and the count of runs left out by reason."""
    estimator = point_estimator()
    skipped: Counter[str] = Counter()
    chosen: list[tuple[int, dict[str, str], EstimateRequest]] = []
    with (data_dir / SILICON_CSV).open(newline="", encoding="utf-8") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            reason = unpriceable(row)
            if reason:
                skipped[reason] += 1
            else:
                chosen.append((line, row, silicon_request(row)))
    priced = estimator.price([request for _, _, request in chosen])
    rows: list[HeldOutRow] = []
    for (line, row, _), result in zip(chosen, priced, strict=True):
        if isinstance(result, ServiceError):
            skipped[f"refused by the service: {type(result).__name__}"] += 1
            continue
        latency = result.document.as_dict()["latency"]
        rows += _rows(line, row, latency, estimator, fitted_on)
    return rows, skipped


def unpriceable(row: dict[str, str]) -> str:
    """Why the service cannot price aggregated run `row` ("" when it can)."""
    if row["mode"] != "agg":
        return "disaggregated serving"
    if int(row["pp_size"] or 1) > 1:
        return "pipeline parallelism"
    return ""


def silicon_request(
    row: dict[str, str], engine: str | None = None, *, static: bool = False
) -> EstimateRequest:
    """The request that `row` answers (one request joining the row's concurrency), priced
    with engine profile `engine` (None: the default). `static`: the older reading, a static
    batch of the row's concurrency running alone."""
    tensor, data = int(row["tp_size"]), int(row["attention_dp_size"] or 1)
    match = _CONCURRENCY.search(row["silicon_data_source"])
    running = int(match.group(1)) if match else int(row["batch_size"]) * data
    expert = max(1, int(row["moe_ep_size"] or 1))  # dense models list 0
    parallelism = {"tensor": tensor, "data": data, "expert": expert}
    return EstimateRequest.model_validate(
        {
            "model": row["model_path"],
            "workload": {
                "batch_size": max(1, running) if static else 1,
                "prompt_tokens": int(row["isl"]),
                "output_tokens": int(row["osl"]),
            },
            "hardware": {
                "gpu": SILICON_GPUS[row["system"]],
                "count": tensor * data,
                "parallelism": parallelism,
            },
            "precision": {"weights": _PRECISIONS[row["precision"]]},
            "serving": {
                "concurrent_sequences": None if static else max(1, running),
                "engine": engine,
            },
        }
    )


def engine_of(row: dict[str, str]) -> str:
    """The engine profile a run's engine is fitted as: vLLM >= 0.8 is vllm-v1 (every vLLM
    version here is), the others keep their own name (no profile)."""
    return "vllm-v1" if row["backend"] == "vllm" else row["backend"]


def _rows(
    line: int,
    row: dict[str, str],
    latency: dict[str, float],
    estimator: Estimator,
    fitted_on: dict[str, frozenset[str]],
) -> list[HeldOutRow]:
    case = Case(
        gpu=SILICON_GPUS[row["system"]],
        vendor="NVIDIA",
        engine=engine_of(row),
        precision=_PRECISIONS[row["precision"]],
        family=estimator.model_family(row["model_path"]),
    )
    # The engine's own profile did not price the run: placed as an engine never fitted on.
    level = evidence_level(case, {**fitted_on, "engine": frozenset({DEFAULT_ENGINE})})
    group = {
        "family": case.family,
        "precision": case.precision,
        "engine": case.engine,
        "gpu": case.gpu,
    }[level]
    ttft_s = float(row["silicon_ttft_ms"]) / 1e3
    tpot_s = float(row["silicon_tpot_ms"]) / 1e3
    total_s = ttft_s + (int(row["osl"]) - 1) * tpot_s
    ref = f"{SILICON_CSV}:{line}"
    case_values = (case.gpu, case.engine, case.precision, case.family)
    measured = {"ttft": ttft_s, "tpot": tpot_s, "total": total_s}
    predicted = {
        "ttft": latency["prefill_s"],
        "tpot": latency["time_per_output_token_s"],
        "total": latency["total_s"],
    }
    return [
        HeldOutRow(level, group, q, SOURCE, ref, measured[q], predicted[q], *case_values)
        for q in measured
        if measured[q] > 0 and predicted[q] > 0
    ]
