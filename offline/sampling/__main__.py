"""``python -m offline.sampling propose --out plan.json [--n 50] [--candidates 2000]``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from offline.fitting.datasets import DEFAULT_DATA_DIR, load_mlenergy
from offline.sampling.plan import features, parameters, plan_document, propose
from offline.sampling.priors import (
    DEPLOYED_SETUPS,
    Configuration,
    buildable,
    draw_candidates,
    trace_lengths,
)
from service.catalog.models import ModelCatalog, load_model_catalog
from service.core.cost_model_errors import CostModelError
from service.pricing.estimator import Estimator
from service.pricing.regressor.runtime import (
    DEFAULT_METADATA_PATH,
    DEFAULT_MODEL_PATH,
    EnergyRegressor,
)

logger = logging.getLogger("offline.sampling")


def measured_points(data_dir: Path, models: ModelCatalog) -> dict[str, npt.NDArray[np.float64]]:
    """Feature points of the ML.ENERGY rows per GPU (what has been measured already)."""
    by_gpu: dict[str, list[npt.NDArray[np.float64]]] = {}
    for m in load_mlenergy(data_dir):
        try:
            params = parameters(models, m.model_id)
        except (LookupError, CostModelError):  # not in the catalogue, or not a plain decoder
            continue
        config = Configuration(
            m.model_id, "", 0, m.batch_size, m.prompt_tokens, m.output_tokens, m.gpu_id, 1
        )
        by_gpu.setdefault(m.gpu_id, []).append(features(config, params))
    return {gpu: np.stack(points) for gpu, points in by_gpu.items()}


def learned_estimator() -> Estimator | None:
    if not (DEFAULT_MODEL_PATH.is_file() and DEFAULT_METADATA_PATH.is_file()):
        return None
    return Estimator.from_catalogues(
        regressor=EnergyRegressor.load(DEFAULT_MODEL_PATH, DEFAULT_METADATA_PATH)
    )


def parse_setups(text: str | None) -> list[tuple[str, int]]:
    """``H100-SXM5-80GB:1,A100-SXM4-80GB:2`` -> [(gpu, count), ...]; the deployed ones if None."""
    if not text:
        return list(DEPLOYED_SETUPS)
    setups = []
    for item in text.split(","):
        gpu, _, count = item.strip().partition(":")
        setups.append((gpu, int(count or "1")))
    return setups


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offline.sampling")
    commands = parser.add_subparsers(dest="command", required=True)
    propose_cmd = commands.add_parser("propose", help="write a measurement plan (JSON)")
    propose_cmd.add_argument("--out", type=Path, required=True)
    propose_cmd.add_argument("--n", type=int, default=50, help="focal configurations")
    propose_cmd.add_argument("--candidates", type=int, default=2000, help="drawn from priors")
    propose_cmd.add_argument("--seed", type=int, default=0)
    propose_cmd.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    propose_cmd.add_argument(
        "--setups", help="GPU setups to draw from, e.g. H100-SXM5-80GB:1 (default: as deployed)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    models = load_model_catalog()
    records = [r for r in models.records if buildable(r)]
    rng = np.random.default_rng(args.seed)
    candidates = draw_candidates(
        records, trace_lengths(args.data), args.candidates, rng, parse_setups(args.setups)
    )
    analytical = Estimator.from_catalogues()
    learned = learned_estimator()
    focal = propose(
        candidates, args.n, models, analytical, learned, measured_points(args.data, models)
    )
    if not focal:
        print("no candidate could be priced; nothing to measure", file=sys.stderr)
        return 1
    document = plan_document(
        focal,
        models,
        model_version=(learned or analytical).model_version,
        seed=args.seed,
        n_candidates=len(candidates),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    logger.info(
        "wrote %s: %d focal configurations, %d to measure (from %d candidates)",
        args.out,
        len(focal),
        len(document["configurations"]),
        len(candidates),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
