"""Time-to-first-token terms of the default profile (vllm-v1: what a request without
`serving.engine` gets), fitted on measured vLLM serving runs, with the terms chosen on inner folds.

The default profile's kernels and decode overheads are the shared fit's (ML.ENERGY, which
publishes no TTFT); a continuous-batch request it prices waits for the prompts of its wave and
its host path only if the profile carries `ttft_wave_share` and `request_overhead_s`. They are
fitted as each engine's are (`engine_profiles.fit_ttft_terms`: TTFT linear in both), on
aiconfigurator's single-node vLLM runs (vLLM 0.11-0.18, the V1 engine the profile stands for)
priced with the default profile itself, its other coefficients kept. Which terms enter (both,
the wave alone, the host path alone or none, `TTFT_TERM_SETS`) is chosen by leave-one-family-out
folds inside the training runs (lowest TTFT MAPE), never on the runs being validated.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from offline.fitting.engine_profiles import (
    NO_TTFT_TERMS,
    TTFT_TERM_SETS,
    Run,
    Slopes,
    TtftTerms,
    engine_runs,
    fit_ttft_terms,
    priced_latency,
)
from offline.fitting.metrics import accuracy
from offline.fitting.silicon_rows import point_estimator, silicon_request
from service.catalog.engines import DEFAULT_ENGINE
from service.core.coefficients import CostModelCoefficients

DEFAULT_TTFT_ENGINES = ("vllm",)
"""The engines whose runs the default profile's TTFT terms are fitted on: vLLM's, the engine
vllm-v1 stands for."""
NO_DECODE_OVERHEADS = (0.0, 0.0, 0.0, 0.0, 0.0)
"""Slopes of the default profile are priced at its own overheads: nothing to add."""


def with_ttft_terms(coefficients: CostModelCoefficients, terms: TtftTerms) -> CostModelCoefficients:
    """`coefficients` with wave share and request overhead `terms`."""
    roofline = replace(coefficients.roofline, ttft_wave_share=terms[0], request_overhead_s=terms[1])
    return replace(coefficients, roofline=roofline)


def default_slopes(runs: list[Run], default: CostModelCoefficients) -> Slopes:
    """`runs` (continuous reading) priced with the `default` profile at no TTFT terms and at a
    unit wave share: TTFT = ttft_s + share x wave_s + overhead; runs it refuses dropped."""
    priced = {}
    for name, terms in (("base", NO_TTFT_TERMS), ("wave", (1.0, 0.0))):
        estimator = point_estimator(coefficients={DEFAULT_ENGINE: with_ttft_terms(default, terms)})
        priced[name] = estimator.price([silicon_request(r.row) for r in runs])
    keep, latency = priced_latency(priced, "base")
    n, family_of = len(keep), point_estimator().model_family
    return Slopes(
        tpot_s=latency["base"][:, 0],
        ttft_s=latency["base"][:, 1],
        tpot_slope=np.zeros((n, 4)),
        ttft_slope=np.zeros((n, 4)),
        measured_tpot_s=np.array([float(runs[i].row["silicon_tpot_ms"]) / 1e3 for i in keep]),
        measured_ttft_s=np.array([float(runs[i].row["silicon_ttft_ms"]) / 1e3 for i in keep]),
        family=[family_of(runs[i].row["model_path"]) for i in keep],
        gpu=[runs[i].gpu for i in keep],
        launch_s=0.0,
        layout=[runs[i].layout for i in keep],
        lines=[runs[i].line for i in keep],
        wave_s=latency["wave"][:, 1] - latency["base"][:, 1],
        continuous=True,
    )


def choose_ttft_terms(slopes: Slopes) -> tuple[str, TtftTerms]:
    """The TTFT term set (`TTFT_TERM_SETS`) with the lowest leave-one-family-out TTFT MAPE
    over `slopes`' runs, and its terms fitted on all of them (none without two families)."""
    families = np.array(slopes.family)
    if len(set(slopes.family)) < 2:
        return "none", NO_TTFT_TERMS
    scores = {}
    for name, used in TTFT_TERM_SETS.items():
        predicted = np.empty(len(families))
        for family in sorted(set(slopes.family)):
            test = families == family
            terms = fit_ttft_terms(slopes.subset(~test), NO_DECODE_OVERHEADS, used)
            predicted[test] = slopes.subset(test).predicted(NO_DECODE_OVERHEADS, terms)[1]
        scores[name] = accuracy(predicted, slopes.measured_ttft_s).mape_pct
    chosen = min(scores, key=lambda name: scores[name])
    return chosen, fit_ttft_terms(slopes, NO_DECODE_OVERHEADS, TTFT_TERM_SETS[chosen])


def fit_default_ttft_terms(
    data_dir: Path, default: CostModelCoefficients, engines: tuple[str, ...] = DEFAULT_TTFT_ENGINES
) -> tuple[str, TtftTerms]:
    """The default profile's chosen TTFT term set and terms, on `engines`' runs."""
    runs = [run for engine in engines for run in engine_runs(data_dir, engine)]
    return choose_ttft_terms(default_slopes(runs, default))
