"""Held-out residuals of the cost model on the sources it is fitted on, each row priced with
coefficients refitted without its group:
- ML.ENERGY energy and TPOT, as the service quotes a row (one request joining round(avg batch)
  running sequences, README prompt lengths: request_inputs.mlenergy_inputs);
- Splitwise static prefill: a batch's prompt phase alone (`prefill_s` of a static quote), the
  residual a static quote's prefill interval is fitted on. Priced on the harness's own profile,
  whose prefill overhead is the one every engine shares (so the served engines' prefill).

Two groupings, both the fit machinery of `cross_validation.refit_without`:
- model family held out (`family_folds.fit_without`, every family of either source in turn);
- GPU held out: Vidur samples, Splitwise and ML.ENERGY rows of one GPU left out of every fit,
  its ML.ENERGY v2 and Splitwise rows priced (v3 ran on H100 only, so without H100 no
  vllm-v1 profile is fitted and v3 rows cannot be priced);
- engine held out: one ML.ENERGY engine's rows (vllm-v0: leaderboard v2, vllm-v1: v3) left
  out of every fit and priced with the other one's profile, as the service prices a version
  it has no profile for (the nearest measured one's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from offline.fitting.cross_validation import Refit
from offline.fitting.datasets import EnergyMeasurement, PhaseTimeMeasurement
from offline.fitting.end_to_end import splitwise_inputs
from offline.fitting.family_folds import (
    FoldData,
    engine_of_row,
    fit_without,
    fit_without_group,
    gpu_of_row,
)
from offline.fitting.request_inputs import RequestInputs, mlenergy_inputs
from service.core.cost_model_errors import CostModelError
from service.core.estimate import estimate_request

SWAPPED_PROFILES = {"vllm-v0": "vllm-v1", "vllm-v1": "vllm-v0"}
"""Engine held out -> the profile its rows are priced with (fitted without them)."""


@dataclass(frozen=True, slots=True)
class HeldOutRow:
    """One measured quantity of one row and the estimate made without the row's group.

    `quantity` is "energy" (per-sequence GPU energy [J]), "tpot" (time per output token [s]),
    "prefill" (a static batch's prompt phase [s]), "ttft" (time to first token of a request
    joining a loaded server [s]) or "total" (whole request [s]); `gpu`, `engine`,
    `precision` (weights) and `family` describe the measured case."""

    level: str
    group: str
    quantity: str
    source: str
    row_ref: str
    measured: float
    predicted: float
    gpu: str
    engine: str
    precision: str
    family: str

    @property
    def log_ratio(self) -> float:
        """ln(measured / predicted): the conformity score the intervals are fitted on."""
        return math.log(self.measured / self.predicted)


def refit_held_out(data: FoldData, tick: Callable[[str], None]) -> list[HeldOutRow]:
    """Family-held-out and GPU-held-out rows (see the module doc); `tick` after each refit."""
    inputs = [(m, mlenergy_inputs(m, data.models, data.gpus)) for m in data.energy]
    # mlenergy_inputs answers a str (why not) for a row it cannot represent
    representable = [(m, i) for m, i in inputs if not isinstance(i, str)]
    static = [(p, splitwise_inputs(p, data.models, data.gpus)) for p in data.phases]
    prefills = [(p, i) for p, i in static if not p.power_capped and not isinstance(i, str)]
    rows: list[HeldOutRow] = []
    families = {i.family for _, i in representable} | {i.family for _, i in prefills}
    for family in sorted(families):
        fold = fit_without(data, family)
        chosen = [(m, i) for m, i in representable if i.family == family]
        rows += _priced_rows("family", family, fold, chosen)
        rows += _prefill_rows(
            "family", family, fold, [x for x in prefills if x[1].family == family]
        )
        tick(f"family {family}")
    gpus = {m.gpu_id for m, _ in representable if m.source == "mlenergy-v2"}
    for gpu in sorted(gpus | {p.gpu_id for p, _ in prefills}):
        refit = _fit_without_gpu(data, gpu)
        chosen = [(m, i) for m, i in representable if m.gpu_id == gpu and gpu in gpus]
        rows += _priced_rows("gpu", gpu, refit, chosen)
        rows += _prefill_rows("gpu", gpu, refit, [x for x in prefills if x[0].gpu_id == gpu])
        tick(f"gpu {gpu}")
    for engine, profile in SWAPPED_PROFILES.items():
        every_sample = np.ones(len(data.sample_families), dtype=bool)  # kernels: no engine
        refit = fit_without_group(data, engine_of_row, engine, every_sample, "engine")
        chosen = [(m, i) for m, i in representable if i.engine == engine]
        rows += _priced_rows("engine", engine, refit, chosen, profile)
        tick(f"engine {engine}")
    return rows


def _prefill_rows(
    level: str,
    group: str,
    fold: Refit,
    chosen: list[tuple[PhaseTimeMeasurement, RequestInputs]],
) -> list[HeldOutRow]:
    """Splitwise configurations' measured prompt phase against a static quote's `prefill_s`."""
    rows: list[HeldOutRow] = []
    for p, i in chosen:
        if i.engine not in fold.model.overheads:
            continue  # the fold left no Splitwise row to fit the harness's profile on
        coefficients = fold.model.coefficients(fold.coefficients, i.engine)
        try:
            estimate = estimate_request(i.arch, i.workload, i.deployment, coefficients)
        except CostModelError:
            continue  # does not fit in memory: the service refuses it too
        case = (p.gpu_id, i.engine, "fp16", i.family)
        ref = p.row_refs[0]
        predicted = estimate.prefill.time_s
        rows.append(
            HeldOutRow(level, group, "prefill", "splitwise", ref, p.prefill_s, predicted, *case)
        )
    return rows


def _fit_without_gpu(data: FoldData, gpu: str) -> Refit:
    kept = np.array(data.samples.gpu_id) != gpu
    return fit_without_group(data, gpu_of_row, gpu, kept, "GPU")


def _priced_rows(
    level: str,
    group: str,
    fold: Refit,
    chosen: list[tuple[EnergyMeasurement, RequestInputs]],
    profile: str | None = None,
) -> list[HeldOutRow]:
    """ML.ENERGY rows priced with `fold`, each with its engine's profile or, given, `profile`."""
    engines = {e: fold.model.coefficients(fold.coefficients, e) for e in fold.model.overheads}
    rows: list[HeldOutRow] = []
    for m, i in chosen:
        priced_as = profile or i.engine
        if priced_as not in engines:
            continue  # the held-out GPU took this engine's only rows (see the module doc)
        try:
            estimate = estimate_request(i.arch, i.workload, i.deployment, engines[priced_as])
        except CostModelError:
            continue  # not priceable by the service either
        case = (m.gpu_id, i.engine, m.weights_precision, i.family)
        measured = {"energy": m.per_sequence_gpu_j, "tpot": m.time_per_output_token_s}
        predicted = {
            "energy": estimate.per_sequence_gpu_j,
            "tpot": estimate.time_per_output_token_s,
        }
        rows += [
            HeldOutRow(level, group, q, m.source, m.row_ref, measured[q], predicted[q], *case)
            for q in measured
        ]
    return rows
