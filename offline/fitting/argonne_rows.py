"""Argonne's AMD MI250 vLLM runs priced by the shipped estimator, as `vendor` held-out rows:
no AMD measurement entered any fit.

The service's catalogue has no MI250, so the estimator here prices over the packaged GPU
catalogue plus one MI250 entry built below from AMD's published figures (the way an operator
would describe a new GPU): one entry per card (both GCDs), tensor parallelism over the cards.
A row is a static batch of `Batch Size` sequences of `Input Output Length` prompt and output
tokens on `Num of Hardware` cards; its `Latency` (whole batch, s) is compared with `total_s`.
vLLM on ROCm in 2024 ran the V0 engine: the rows are priced with the vllm-v0 profile.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

from offline.fitting.held_out_rows import HeldOutRow
from offline.fitting.silicon_rows import point_estimator
from service.catalog.gpus import GpuCatalog
from service.catalog.lookup import DATA_DIR
from service.errors import ServiceError
from service.schemas.estimate_request import EstimateRequest

ARGONNE_CSV = "argonne-mi250/argonne_mi250_vllm.csv"
SOURCE = "argonne-mi250"
# AMD's MI250 specification table (208 CUs, 45.3 TF FP32 vector, 362.1 TF FP16/BF16 matrix,
# 362.1 TOPS INT8, 128 GB HBM2e, 3.2 TB/s; six Infinity Fabric links where the MI250X has
# eight), as reproduced at the URL below; TDP 500 W from the second.
_DATASHEET = (
    "AMD Instinct MI250 specifications (OAM, 2 GCDs): "
    "https://zexron.com/amd-mi250-x-aldebaran-as-mcm-with-up-to-479-teraflop-s-and-560-watt-tdp; "
    "TDP: https://yobitel.com/knowledge-base/amd-mi250"
)
MI250_FIGURES: dict[str, Any] = {
    "id": "MI250",
    "name": "AMD Instinct MI250",
    "aliases": ["AMD Instinct MI250", "mi250"],
    # dense matrix peaks [FLOP/s]; FP32 vector peak; 208 CUs x 16 SFU results/clk x 1.7 GHz
    "tensor_dense_flops_per_s": {"bf16": 362.1e12, "fp16": 362.1e12, "int8": 362.1e12},
    "cuda_core_fp32_flops_per_s": 45.3e12,
    "special_function_ops_per_s": 208 * 16 * 1.7e9,
    "memory_bytes": 128e9,
    "memory_bandwidth_bytes_per_s": 3.2768e12,
    # 6 Infinity Fabric links (100 GB/s each, both directions) = 300 GB/s per direction
    "interconnect_bandwidth_bytes_per_s": 300e9,
    "tdp_w": 500,
    "idle_w": 90,  # estimate, as for the catalogue's other OAM cards
}


def gpus_with_mi250() -> GpuCatalog:
    """The packaged GPU catalogue plus MI250 (the MI300X entry's layout, MI250's figures)."""
    document = json.loads((DATA_DIR / "gpus.json").read_text(encoding="utf-8"))
    mi300x = next(g for g in document["gpus"] if g["id"] == "MI300X")
    sources = {k: _DATASHEET for k in MI250_FIGURES if k not in ("id", "name", "aliases")}
    sources["idle_w"] = "estimate: offline/fitting/argonne_rows.py"
    document["gpus"].append({**mi300x, **MI250_FIGURES, "sources": sources})
    return GpuCatalog(document)


def argonne_held_out(data_dir: Path) -> tuple[list[HeldOutRow], Counter[str]]:
    """`total` rows of every run the estimator prices, and the runs left out by reason."""
    estimator = point_estimator(gpus_with_mi250())
    skipped: Counter[str] = Counter()
    with (data_dir / ARGONNE_CSV).open(newline="", encoding="utf-8") as handle:
        lines = list(enumerate(csv.DictReader(handle), start=2))
    requests = [_request(row) for _, row in lines]
    rows: list[HeldOutRow] = []
    for (line, row), result in zip(lines, estimator.price(requests), strict=True):
        if isinstance(result, ServiceError):
            skipped[f"MI250: refused by the service: {type(result).__name__}"] += 1
            continue
        family = estimator.model_family(row["Model"])
        predicted = float(result.document.as_dict()["latency"]["total_s"])
        case = ("MI250", "vllm-v0", "bf16", family)
        ref = f"{ARGONNE_CSV}:{line}"
        measured = float(row["Latency"])
        rows.append(HeldOutRow("vendor", "AMD", "total", SOURCE, ref, measured, predicted, *case))
    return rows, skipped


def _request(row: dict[str, str]) -> EstimateRequest:
    length, cards = int(row["Input Output Length"]), int(row["Num of Hardware"])
    return EstimateRequest.model_validate(
        {
            "model": row["Model"],
            "workload": {
                "batch_size": int(row["Batch Size"]),
                "prompt_tokens": length,
                "output_tokens": length,
            },
            "hardware": {"gpu": "MI250", "count": cards},
            "precision": {"weights": "bf16"},
            "serving": {"engine": "vllm-v0"},
        }
    )
