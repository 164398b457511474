"""Focused sampling: priors, scores, +-C neighbourhoods and the plan file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from offline.fitting.datasets import DEFAULT_DATA_DIR
from offline.sampling.__main__ import main
from offline.sampling.plan import (
    MAX_NOVELTY,
    NEIGHBOURHOOD,
    features,
    neighbourhood,
    parameters,
    propose,
)
from offline.sampling.priors import BATCH_SIZES, Configuration, buildable, draw_candidates
from service.catalog.models import load_model_catalog
from service.pricing.estimator import Estimator

needs_data = pytest.mark.skipif(
    not (DEFAULT_DATA_DIR / "azure-llm-trace-2023").is_dir(), reason="shared data not present"
)

CONFIG = Configuration("Qwen/Qwen3-8B", "qwen", 0, 8, 500, 100, "H100-SXM5-80GB", 1)


def test_neighbourhood_moves_one_axis_by_c() -> None:
    moves = dict(neighbourhood(CONFIG))
    assert NEIGHBOURHOOD == {"prompt_tokens": 10, "output_tokens": 1, "num_layers": 1}
    assert moves["center"] == CONFIG
    assert moves["prompt_tokens+10"].prompt_tokens == 510
    assert moves["prompt_tokens-10"].prompt_tokens == 490
    assert moves["output_tokens-1"].output_tokens == 99
    assert moves["num_layers+1"].layers_delta == 1
    request = moves["num_layers+1"].request(load_model_catalog())
    assert request["architecture"]["num_layers"] == 37 and "model" not in request
    # no zero-length neighbours
    short = Configuration("Qwen/Qwen3-8B", "qwen", 0, 1, 5, 1, "L4", 1)
    names = [name for name, _ in neighbourhood(short)]
    assert "prompt_tokens-10" not in names and "output_tokens-1" not in names


def test_candidates_follow_the_priors_and_the_widest_uncertainty_wins() -> None:
    models = load_model_catalog()
    records = [r for r in models.records if buildable(r)]
    lengths = np.array([[100, 20], [2000, 300]], dtype=np.int64)
    drawn = draw_candidates(records, lengths, 40, np.random.default_rng(1))
    assert {c.batch_size for c in drawn} <= set(BATCH_SIZES)
    assert {(c.prompt_tokens, c.output_tokens) for c in drawn} <= {(100, 20), (2000, 300)}
    # a measured point right at one candidate makes it the least novel
    near = drawn[0]
    measured = {near.gpu: features(near, parameters(models, near.model))[None, :]}
    best = propose(drawn, 40, models, Estimator.from_catalogues(), None, measured)
    scores = [s.score for s in best]
    assert scores == sorted(scores, reverse=True)
    by_config = {s.configuration: s for s in best}
    if near in by_config:
        # Its score is its interval's log width alone (novelty 0, no regressor), so it ranks
        # below every candidate on a GPU without measurements (novelty capped at 4); a
        # candidate near it on its own GPU may rank lower still.
        mine = by_config[near]
        assert mine.quote["novelty"] == 0.0
        assert mine.score == mine.quote["interval_log_width"] < MAX_NOVELTY
        elsewhere = [s.score for s in best if s.configuration.gpu != near.gpu]
        assert all(mine.score < other for other in elsewhere)


@needs_data
def test_propose_writes_a_plan(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    assert main(["propose", "--out", str(out), "--n", "3", "--candidates", "40"]) == 0
    plan = json.loads(out.read_text())
    assert plan["format"] == "llm-energy-quotes/measurement-plan/1"
    assert plan["focal_configurations"] == 3 and plan["neighbourhood"] == NEIGHBOURHOOD
    centers = [c for c in plan["configurations"] if c["variation"] == "center"]
    assert len(centers) == 3 and all(c["quote"]["gpu_j"] > 0 for c in centers)
    assert len(plan["configurations"]) <= 21
    assert len({c["id"] for c in plan["configurations"]}) == len(plan["configurations"])
