"""Argonne's AMD MI250 vLLM runs priced by the shipped estimator, as `vendor` held-out rows:
no AMD measurement entered any fit.

The MI250 is priced from its catalogue entry (service/catalog/data/gpus.json: one entry per
card, both GCDs), tensor parallelism over the cards: as the service prices a request for
`Num of Hardware` MI250s. (vLLM itself ran one worker per GCD, tensor parallel 2 per card: the
benchmark's run-throughput-bench.sh passes --tensor-parallel-size 4 and 8 for the 2- and
4-card rows; the service has no per-GCD entry, see docs/design/intervals.md.)
A row is a static batch of `Batch Size` sequences of `Input Output Length` prompt and output
tokens; its `Latency` (the mean wall time of one `llm.generate` over the batch, s) is compared
with `total_s`. The runs used vLLM v0.6.1 with --dtype float16 (the benchmark's
vLLM/MI250/README.MD and script, argonne-lcf/LLM-Inference-Bench): the request names that
release and precision, and the service prices it with the profile of the nearest measured
release (vllm-v0, 0.5.4).
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from offline.fitting.held_out_rows import HeldOutRow
from offline.fitting.silicon_rows import point_estimator
from service.errors import ServiceError
from service.schemas.estimate_request import EstimateRequest

ARGONNE_CSV = "argonne-mi250/argonne_mi250_vllm.csv"
SOURCE = "argonne-mi250"
VLLM_RELEASE = "0.6.1"


def argonne_held_out(data_dir: Path) -> tuple[list[HeldOutRow], Counter[str]]:
    """`total` rows of every run the estimator prices, and the runs left out by reason."""
    estimator = point_estimator()
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
        case = ("MI250", f"vllm=={VLLM_RELEASE}", "fp16", family)
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
            "precision": {"weights": "fp16"},
            "serving": {"engine": "vllm", "engine_version": VLLM_RELEASE},
        }
    )
