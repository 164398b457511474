"""The analytical estimate on ML.ENERGY rows read three ways, against the measurements.

    python -m offline.fitting.serving_validation --data ../shared/data \
        --out bench/results/serving_validation.md

Readings of one row (shared/data/README.md), all with the shipped coefficients of the row's
engine profile (v2: vllm-v0, v3: vllm-v1) and no refit:
- `static, as fitted`: a static batch of round(avg batch) sequences with the prompt lengths
  the coefficients were fitted with (lm-arena-chat 210 tokens), memory unchecked, as
  `fit_cost_model` prices it (its own training reading: in-sample, not held out);
- `static, README prompts`: the same with the README's task means (lm-arena-chat 690), priced
  as the service quotes it (a batch that does not fit runs in waves);
- `continuous`: one request (batch 1) joining round(avg batch) running sequences
  (`concurrent_sequences`), README prompts, as the service quotes it;
- `continuous, history cached`: the same with lm-arena-chat's resent history as prefix-cache
  hits (`cached_prompt_tokens` = 690 - 210 = 480, the share the rows' timings put in vLLM's
  prefix cache, see energy_leaderboard.py): what a gateway that knows the cached tokens sends.
Measured energy per request is compared with `per_sequence_gpu_j`, measured time per output
token (v2 average TPOT, v3 median ITL) with `time_per_output_token_s`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from offline.fitting.datasets import DEFAULT_DATA_DIR, EnergyMeasurement, load_mlenergy
from offline.fitting.energy_leaderboard import PROMPT_TOKENS_BY_TASK
from offline.fitting.metrics import accuracy
from offline.fitting.request_inputs import RequestInputs, mlenergy_inputs
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import load_engine_coefficients
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError
from service.core.estimate import estimate_request
from service.core.workload import Workload

README_PROMPT_TOKENS = {**PROMPT_TOKENS_BY_TASK, "lm-arena-chat": 690}
"""Task mean prompt lengths as shared/data/README.md gives them."""

Reading = Callable[[EnergyMeasurement, Workload], tuple[Workload, bool]]


def _as_fitted(m: EnergyMeasurement, w: Workload) -> tuple[Workload, bool]:
    return w, False


def _static_readme(m: EnergyMeasurement, w: Workload) -> tuple[Workload, bool]:
    return replace(w, prompt_tokens=README_PROMPT_TOKENS[m.task]), True


def _continuous(m: EnergyMeasurement, w: Workload) -> tuple[Workload, bool]:
    prompt = README_PROMPT_TOKENS[m.task]
    return Workload(1, prompt, w.output_tokens, concurrent_sequences=m.batch_size), True


def _continuous_cached(m: EnergyMeasurement, w: Workload) -> tuple[Workload, bool]:
    joined, check = _continuous(m, w)
    cached = joined.prompt_tokens - PROMPT_TOKENS_BY_TASK[m.task]
    return replace(joined, cached_prompt_tokens=cached), check


READINGS: dict[str, Reading] = {
    "static, as fitted": _as_fitted,
    "static, README prompts": _static_readme,
    "continuous": _continuous,
    "continuous, history cached": _continuous_cached,
}


@dataclass(frozen=True, slots=True)
class Priced:
    """One row priced under one reading: predicted and measured values."""

    source: str
    task: str
    gpu_id: str
    reading: str
    energy_j: float
    measured_j: float
    tpot_s: float
    measured_tpot_s: float


def priced_rows(data_dir: Path) -> tuple[list[Priced], list[str]]:
    """Every representable row under every reading, and what was left out (with why)."""
    models, gpus, engines = load_model_catalog(), load_gpu_catalog(), load_engine_coefficients()
    rows: list[Priced] = []
    skipped: list[str] = []
    for m in load_mlenergy(data_dir):
        inputs = mlenergy_inputs(m, models, gpus)
        if isinstance(inputs, str):
            skipped.append(inputs)
            continue
        try:
            rows.extend(_priced(m, inputs, engines[inputs.engine]))
        except CostModelError as error:
            skipped.append(f"{m.row_ref}: {error}")
    return rows, skipped


def _priced(
    m: EnergyMeasurement, inputs: RequestInputs, coefficients: CostModelCoefficients
) -> list[Priced]:
    out = []
    for name, reading in READINGS.items():
        workload, check = reading(m, inputs.workload)
        estimate = estimate_request(
            inputs.arch, workload, inputs.deployment, coefficients, check_memory=check
        )
        out.append(
            Priced(
                m.source,
                m.task,
                m.gpu_id,
                name,
                estimate.per_sequence_gpu_j,
                m.per_sequence_gpu_j,
                estimate.time_per_output_token_s,
                m.time_per_output_token_s,
            )
        )
    return out


def _table(rows: list[Priced], key: Callable[[Priced], str]) -> list[str]:
    lines = [
        "| group | reading | rows | energy MAPE % | within 10 % | within 30 % | median ratio "
        "| TPOT MAPE % | within 10 % | within 30 % | median ratio |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for group in sorted({key(r) for r in rows}):
        for name in READINGS:
            chosen = [r for r in rows if key(r) == group and r.reading == name]
            energy = accuracy(
                np.array([r.energy_j for r in chosen]), np.array([r.measured_j for r in chosen])
            )
            tpot = accuracy(
                np.array([r.tpot_s for r in chosen]), np.array([r.measured_tpot_s for r in chosen])
            )
            lines.append(
                f"| {group} | {name} | {energy.count} | "
                + " | ".join(energy.as_row()[1:] + tpot.as_row()[1:])
                + " |"
            )
    return lines


def report(data_dir: Path) -> str:
    """The markdown report."""
    rows, skipped = priced_rows(data_dir)
    coefficients = load_engine_coefficients()["vllm-v1"].version
    header = [
        "# ML.ENERGY under the continuous-batch reading vs the static one",
        "",
        "Made by `python -m offline.fitting.serving_validation --data ../shared/data "
        f"--out bench/results/serving_validation.md` at {datetime.now(UTC):%Y-%m-%dT%H:%MZ}, "
        f"coefficients `{coefficients}` as shipped (fitted on the static reading with the "
        "fitted prompts; not refitted here). The analytical estimate alone (no learned "
        "correction). Data: ML.ENERGY leaderboard v2 and v3 (Apache-2.0), read from "
        f"`../shared/data`; {len(skipped)} rows left out (multimodal, pipeline-parallel, "
        "unsupported architectures).",
        "",
        __doc__.split("\n\n", 2)[2].strip() if __doc__ else "",
        "",
        "The first reading is in-sample for these coefficients (they were fitted on it); the "
        "other two are read with coefficients fitted on another reading, so they show how "
        "the new mapping moves the estimate before any refit.",
        "",
        "## All rows",
        "",
        *_table(rows, lambda r: "all"),
        "",
        "## By source",
        "",
        *_table(rows, lambda r: r.source),
        "",
        "## By GPU",
        "",
        *_table(rows, lambda r: r.gpu_id),
        "",
        "## By source and task",
        "",
        *_table(rows, lambda r: f"{r.source} {r.task}"),
        "",
    ]
    return "\n".join(header)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=Path("bench/results/serving_validation.md"))
    args = parser.parse_args()
    args.out.write_text(report(args.data), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
