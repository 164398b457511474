"""The analytical estimate on ML.ENERGY rows read three ways, against the measurements.

    python -m offline.fitting.serving_validation --data ../shared/data \
        --out bench/results/serving_validation.md      # ~12 min; --no-held-out: seconds

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
from offline.fitting.family_folds import FoldData, fit_without
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


def held_out_rows(data_dir: Path) -> list[Priced]:
    """Every representable row under every reading, priced with coefficients refitted without
    its model family (family_folds.fit_without: the static-reading fit behind
    `fit_cost_model`'s leave-one-family-out report)."""
    data = FoldData.load(data_dir)
    inputs = [(m, mlenergy_inputs(m, data.models, data.gpus)) for m in data.energy]
    representable = [(m, i) for m, i in inputs if not isinstance(i, str)]
    rows: list[Priced] = []
    for family in sorted({i.family for _, i in representable}):
        fold = fit_without(data, family)
        engines = {e: fold.model.coefficients(fold.coefficients, e) for e in fold.model.overheads}
        for m, i in representable:
            if i.family == family:
                try:
                    rows.extend(_priced(m, i, engines[i.engine]))
                except CostModelError:
                    continue  # left out of the shipped-coefficient tables too
    return rows


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


def report(data_dir: Path, *, held_out: bool) -> str:
    """The markdown report (with `held_out`, also the leave-one-family-out tables)."""
    rows, skipped = priced_rows(data_dir)
    coefficients = load_engine_coefficients()["vllm-v1"].version
    header = [
        "# ML.ENERGY under the continuous-batch reading vs the static one",
        "",
        "Made by `python -m offline.fitting.serving_validation --data ../shared/data "
        f"--out bench/results/serving_validation.md{'' if held_out else ' --no-held-out'}` at "
        f"{datetime.now(UTC):%Y-%m-%dT%H:%MZ}. Tables up to the held-out ones: coefficients "
        f"`{coefficients}` as shipped (fitted on the static reading with the fitted prompts, "
        "these rows included). The analytical estimate alone (no learned "
        "correction). Data: ML.ENERGY leaderboard v2 and v3 (Apache-2.0), read from "
        f"`../shared/data`; {len(skipped)} rows left out (multimodal, pipeline-parallel, "
        "unsupported architectures).",
        "",
        __doc__.split("\n\n", 2)[2].strip() if __doc__ else "",
        "",
        "With the shipped coefficients the first reading is in-sample (they were fitted on "
        "it); the others are read with coefficients fitted on another reading, so they show "
        "how the new mapping moves the estimate before any refit.",
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
    if held_out:
        folds = held_out_rows(data_dir)
        header += [
            "## Held out by model family",
            "",
            "Each row priced with coefficients refitted, on the static reading with the fitted "
            "prompts, without its model family (`family_folds.fit_without`, the fit behind "
            "`fit_cost_model`'s leave-one-family-out report; no coefficient is fitted on the "
            "other readings).",
            "",
            *_table(folds, lambda r: "all"),
            "",
            *_table(folds, lambda r: r.source),
            "",
            *_table(folds, lambda r: r.gpu_id),
            "",
        ]
    return "\n".join(header)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=Path("bench/results/serving_validation.md"))
    parser.add_argument(
        "--no-held-out",
        action="store_true",
        help="skip the leave-one-family-out tables (one refit per family, ~1.5 min each)",
    )
    args = parser.parse_args()
    args.out.write_text(report(args.data, held_out=not args.no_held_out), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
