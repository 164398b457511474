"""Scoring candidates, expanding neighbourhoods, and the measurement plan file.

**Score** (where a measurement helps most), in log space so that it is unit-free:

- the width of the quote's interval, ``ln(gpu_j_high / gpu_j_low)``;
- when the learned regressor is loaded, its disagreement with the analytical model,
  ``|ln(learned / analytical)|``: where the two disagree, one of them is wrong;
- the distance to the nearest configuration already measured on the same GPU (ML.ENERGY
  rows), in (log2 batch, log2 prompt, log2 output, log2 parameters) units, capped at 4: a
  configuration far from every measurement is where the models extrapolate.

The score is their sum. The best `n` distinct candidates are kept and each is expanded, as in
LLMCO2's Algorithm 1, into its +-C neighbourhood one axis at a time (C = 10 prompt tokens,
1 generated token, 1 layer), so that the measurements also give the local slopes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from offline.sampling.priors import Configuration
from service.catalog.models import ModelCatalog
from service.errors import ServiceError
from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EstimateRequest

PLAN_FORMAT = "llm-energy-quotes/measurement-plan/1"
NEIGHBOURHOOD = {"prompt_tokens": 10, "output_tokens": 1, "num_layers": 1}
MAX_NOVELTY = 4.0


@dataclass(frozen=True, slots=True)
class Scored:
    configuration: Configuration
    score: float
    quote: dict[str, float]


def parameters(models: ModelCatalog, model_id: str) -> float:
    """Approximate weight count of a catalogue model (12 h^2 per layer + embeddings)."""
    arch = models.get(model_id).require_architecture()
    return 12.0 * arch.hidden_size**2 * arch.num_layers + arch.vocab_size * arch.hidden_size


def novelty(point: npt.NDArray[np.float64], measured: npt.NDArray[np.float64] | None) -> float:
    """Distance to the nearest measured point (log2 units), capped; the cap when none."""
    if measured is None or len(measured) == 0:
        return MAX_NOVELTY
    distance = float(np.min(np.linalg.norm(measured - point, axis=1)))
    return min(distance, MAX_NOVELTY)


def features(config: Configuration, params: float) -> npt.NDArray[np.float64]:
    return np.log2(
        np.array(
            [config.batch_size, config.prompt_tokens, config.output_tokens, params],
            dtype=np.float64,
        )
    )


def score(
    config: Configuration,
    models: ModelCatalog,
    analytical: Estimator,
    learned: Estimator | None,
    measured: dict[str, npt.NDArray[np.float64]],
) -> Scored | None:
    """The candidate's score and quote; None when the service cannot price it (too large for
    the setup, lengths beyond the model's context)."""
    request = EstimateRequest.model_validate(config.request(models))
    try:
        base = analytical.estimate(request).response.energy
        other = learned.estimate(request).response.energy if learned is not None else None
    except ServiceError:
        return None
    quoted = other or base
    width = math.log(quoted.gpu_j_high / quoted.gpu_j_low)
    disagreement = abs(math.log(other.gpu_j / base.gpu_j)) if other is not None else 0.0
    point = features(config, parameters(models, config.model))
    far = novelty(point, measured.get(config.gpu))
    quote = {
        "gpu_j": quoted.gpu_j,
        "gpu_j_low": quoted.gpu_j_low,
        "gpu_j_high": quoted.gpu_j_high,
        "analytical_gpu_j": base.gpu_j,
        "interval_log_width": width,
        "novelty": far,
    }
    if other is not None:
        quote["learned_gpu_j"] = other.gpu_j
        quote["disagreement"] = disagreement
    return Scored(config, width + disagreement + far, quote)


def neighbourhood(config: Configuration) -> list[tuple[str, Configuration]]:
    """The configuration and its +-C neighbours, one axis at a time (invalid ones dropped)."""
    c_prompt, c_output, c_layers = (NEIGHBOURHOOD[k] for k in NEIGHBOURHOOD)
    moves = [
        ("center", config),
        (f"prompt_tokens-{c_prompt}", config.moved(prompt_tokens=-c_prompt)),
        (f"prompt_tokens+{c_prompt}", config.moved(prompt_tokens=c_prompt)),
        (f"output_tokens-{c_output}", config.moved(output_tokens=-c_output)),
        (f"output_tokens+{c_output}", config.moved(output_tokens=c_output)),
        (f"num_layers-{c_layers}", config.moved(layers=-c_layers)),
        (f"num_layers+{c_layers}", config.moved(layers=c_layers)),
    ]
    return [
        (name, c)
        for name, c in moves
        if c.prompt_tokens >= 1 and c.output_tokens >= 1 and c.layers_delta > -1000
    ]


def propose(
    candidates: Sequence[Configuration],
    n: int,
    models: ModelCatalog,
    analytical: Estimator,
    learned: Estimator | None,
    measured: dict[str, npt.NDArray[np.float64]],
) -> list[Scored]:
    """The `n` best-scoring distinct candidates, best first."""
    scored = {}
    for config in candidates:
        if config in scored:
            continue
        result = score(config, models, analytical, learned, measured)
        if result is not None:
            scored[config] = result
    return sorted(scored.values(), key=lambda s: -s.score)[:n]


def plan_document(
    focal: Sequence[Scored],
    models: ModelCatalog,
    *,
    model_version: str,
    seed: int,
    n_candidates: int,
) -> dict[str, Any]:
    """The measurement plan: every focal configuration and its neighbours, as estimate
    requests the harness and the service both read."""
    configurations = []
    for index, scored in enumerate(focal):
        for variation, config in neighbourhood(scored.configuration):
            configurations.append(
                {
                    "id": f"f{index:03d}-{variation}",
                    "focal": index,
                    "variation": variation,
                    "score": scored.score,
                    "model": config.model,
                    "family": config.family,
                    "layers_delta": config.layers_delta,
                    "request": config.request(models),
                    "quote": scored.quote if variation == "center" else None,
                }
            )
    return {
        "format": PLAN_FORMAT,
        "created_at": datetime.now(UTC).isoformat(),
        "model_version": model_version,
        "seed": seed,
        "candidates_drawn": n_candidates,
        "focal_configurations": len(focal),
        "neighbourhood": NEIGHBOURHOOD,
        "scoring": "ln(gpu_j_high/gpu_j_low) + |ln(learned/analytical)| + distance to the "
        "nearest measured configuration on the GPU (log2 units, capped at 4)",
        "configurations": configurations,
    }
