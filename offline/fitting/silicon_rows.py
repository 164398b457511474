"""aiconfigurator's measured serving runs (H100/H200; vLLM, SGLang, TensorRT-LLM) as the requests
the service prices, and the point-estimate estimator that prices them.

Each aggregated row is one request (batch 1) joining a server at the row's concurrency
(shared/data/README.md). Each run's parallelism is the request's: tensor = tp_size, data =
attention_dp_size, expert = moe_ep_size on tp_size x attention_dp_size GPUs. Left out of the
fits, and counted: disaggregated rows, pipeline-parallel rows. A disaggregated row is priced as
`serving.disaggregated` asks (disaggregated_request), for validation only. The held-out
rows the intervals are fitted on are silicon_levels.py's (each run with its own engine's
profile refitted without its group).
"""

from __future__ import annotations

import re

from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import load_engine_coefficients
from service.catalog.gpus import GpuCatalog
from service.catalog.intervals import QUANTITIES, EvidenceIntervals, LevelInterval
from service.catalog.regions import load_region_catalog
from service.core.coefficients import CostModelCoefficients
from service.pricing.estimator import Estimator
from service.pricing.evidence import LEVELS
from service.schemas.estimate_request import EstimateRequest

SILICON_CSV = "aiconfigurator/silicon_sample_h100_h200.csv"
SILICON_GPUS = {"h100_sxm": "H100-SXM5-80GB", "h200_sxm": "H200-SXM-141GB"}
# NVFP4 is not a precision the request takes; MXFP4 is the 4-bit float it has.
PRECISIONS = {"": "bf16", "fp8": "fp8", "fp4": "mxfp4", "int4": "int4"}
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
            "precision": {"weights": PRECISIONS[row["precision"]]},
            "serving": {
                "concurrent_sequences": None if static else max(1, running),
                "engine": engine,
            },
        }
    )


def _worker(row: dict[str, str], side: str) -> tuple[int, dict[str, int]]:
    """GPUs and `parallelism` of a disaggregated row's `side` ("prefill" or "decode") worker:
    tensor = tp, data = attention_dp, expert = moe_ep (dense models list 0)."""
    tensor = int(row[f"{side}_tp_size"])
    data = int(row[f"{side}_attention_dp_size"] or 1)
    expert = max(1, int(row[f"{side}_moe_ep_size"] or 1))
    return tensor * data, {"tensor": tensor, "data": data, "expert": expert}


def disaggregated_request(row: dict[str, str], *, aggregated: bool = False) -> EstimateRequest:
    """The request that disaggregated run `row` answers: one request (batch 1) joining its
    decode worker's share of the run's concurrency (silicon_concurrency over
    decode_num_workers, one worker where not given), the decode worker as `hardware`, the
    prefill worker (`prefill_batch_size` prompts a pass, 1 where not given; prefill_num_workers
    over decode_num_workers of them per decode worker, 1 where not given) as
    `serving.disaggregated.prefill`, priced with its engine's profile. `aggregated`: the
    same request without `serving.disaggregated` (the decode worker's GPUs serving both
    phases), the reading to compare against."""
    match = _CONCURRENCY.search(row["silicon_data_source"])
    concurrency = int(match.group(1)) if match else int(row["decode_batch_size"] or 1)
    workers = int(row["decode_num_workers"] or 1)
    decode_count, decode = _worker(row, "decode")
    prefill_count, prefill = _worker(row, "prefill")
    serving: dict[str, object] = {
        "concurrent_sequences": max(1, round(concurrency / workers)),
        "engine": row["backend"],
    }
    if not aggregated:
        serving["disaggregated"] = {
            "prefill": {
                "count": prefill_count,
                "parallelism": prefill,
                "batch_size": int(row["prefill_batch_size"] or 1),
                "workers_per_decode_worker": int(row["prefill_num_workers"] or 1) / workers,
            }
        }
    return EstimateRequest.model_validate(
        {
            "model": row["model_path"],
            "workload": {
                "batch_size": 1,
                "prompt_tokens": int(row["isl"]),
                "output_tokens": int(row["osl"]),
            },
            "hardware": {
                "gpu": SILICON_GPUS[row["system"]],
                "count": decode_count,
                "parallelism": decode,
            },
            "precision": {"weights": PRECISIONS[row["precision"]]},
            "serving": serving,
        }
    )
