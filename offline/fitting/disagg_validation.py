"""aiconfigurator's disaggregated serving runs priced as `serving.disaggregated` asks.

Each `mode = disagg` row of the silicon sample is one request joining its decode worker's share
of the run's concurrency, its prompt on the run's prefill worker (silicon_rows.
disaggregated_request), priced with the shipped profile of its engine. Two readings of the
same rows: `disaggregated` (prefill pass + KV hand-off, decode-only passes) and `aggregated`
(the same request with the decode worker's GPUs serving both phases, the only reading the
service had before). No disaggregated row is used to fit anything (silicon_rows.unpriceable
keeps them out of every fit); the engine profiles were fitted on the aggregated runs.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from offline.fitting.metrics import accuracy
from offline.fitting.silicon_rows import SILICON_CSV, disaggregated_request, point_estimator
from service.errors import ServiceError
from service.pricing.priced import PricedRequest

READINGS = ("aggregated", "disaggregated")
MEASURED = (("ttft", "prefill_s", "silicon_ttft_ms"), ("tpot", "time_per_output_token_s",
            "silicon_tpot_ms"))  # fmt: skip


@dataclass(frozen=True, slots=True)
class DisaggPriced:
    """One measured quantity [s] of one disaggregated run under one reading."""

    quantity: str  # "ttft" or "tpot"
    reading: str
    engine: str
    model: str
    workers: str  # "workers given" or "workers not given" (one of each assumed)
    predicted: float
    measured: float


def disagg_rows(data_dir: Path) -> tuple[list[DisaggPriced], dict[str, int]]:
    """Every disaggregated run priced under both readings (a run counts where both price it),
    and how many runs were refused, by reason."""
    with (data_dir / SILICON_CSV).open(newline="", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["mode"] == "disagg"]
    print(f"aiconfigurator disagg: {len(rows)} runs ...", file=sys.stderr)
    estimator = point_estimator()
    priced = {
        r: estimator.price(
            [disaggregated_request(row, aggregated=r == "aggregated") for row in rows]
        )
        for r in READINGS
    }
    out: list[DisaggPriced] = []
    refused: dict[str, int] = {}
    for i, row in enumerate(rows):
        results = {r: priced[r][i] for r in READINGS}
        failed = [x for x in results.values() if isinstance(x, ServiceError)]
        if failed:
            reason = f"{type(failed[0]).__name__}: {str(failed[0])[:80]}"
            refused[reason] = refused.get(reason, 0) + 1
            continue
        for reading, result in results.items():
            assert isinstance(result, PricedRequest)
            latency = result.document.as_dict()["latency"]
            for quantity, key, column in MEASURED:
                given = "workers given" if row["decode_num_workers"] else "workers not given"
                out.append(DisaggPriced(quantity, reading, row["backend"], row["model_path"],
                                        given, float(latency[key]),
                                        float(row[column]) / 1e3))  # fmt: skip
    return out, refused


def _table(rows: list[DisaggPriced], key: Callable[[DisaggPriced], str]) -> list[str]:
    lines = [
        "| group | quantity | reading | runs | MAPE % | within 10 % | within 30 % "
        "| median pred/meas |",
        "|---|---|---|--:|--:|--:|--:|--:|",
    ]
    for group, quantity in sorted({(key(r), r.quantity) for r in rows}):
        for reading in READINGS:
            chosen = [
                r for r in rows if (key(r), r.quantity, r.reading) == (group, quantity, reading)
            ]
            if chosen:
                a = accuracy(np.array([r.predicted for r in chosen]),
                             np.array([r.measured for r in chosen]))  # fmt: skip
                lines.append(
                    f"| {group} | {quantity} | {reading} | " + " | ".join(a.as_row()) + " |"
                )
    return lines


def disagg_section(data_dir: Path) -> list[str]:
    """The report's section on the disaggregated runs (markdown lines)."""
    rows, refused = disagg_rows(data_dir)
    runs = len(rows) // (len(READINGS) * len(MEASURED))
    lines = ["## Disaggregated runs (`mode = disagg`), not used in any fit", "",
             (__doc__ or "").split("\n\n", 1)[1].strip(), "",
             f"{runs} runs priced under both readings; refused: "
             + (", ".join(f"{n} ({reason})" for reason, n in sorted(refused.items())) or "none"),
             "", "### All runs", ""]  # fmt: skip
    lines += _table(rows, lambda r: "all")
    lines += ["", "### By whether the run gives its worker counts", ""]
    lines += _table(rows, lambda r: r.workers)
    lines += ["", "### By engine", ""]
    lines += _table(rows, lambda r: r.engine)
    lines += ["", "### By model", ""]
    lines += _table(rows, lambda r: r.model)
    lines += ["", "### By engine and model", ""]
    lines += _table(rows, lambda r: f"{r.engine} {r.model}")
    return [*lines, ""]
