"""Recalibration on measured data: post part of a measured set as observations, recalibrate
through the API, and compare the error on the rest before and after.

    .venv/bin/python bench/recalibration_report.py --data ../shared/data

Runs the service in-process (TestClient, a temporary SQLite database, the open dev mode, the
estimator as shipped: the learned regressor when `models/` holds one, else the roofline). For
each measured set and split: every row is quoted once (uncalibrated), the rows of the
calibration part are posted as observations (GPU energy of the whole request = energy per
request x batch size), `POST /v1/calibrations` fits with its defaults, and the evaluation rows
are quoted again. Writes ``bench/results/recalibration.md``.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from service.catalog.models import load_model_catalog
from service.config import Settings
from service.db import migrate
from service.fitting.datasets import DEFAULT_DATA_DIR, EnergyMeasurement, load_mlenergy
from service.fitting.request_inputs import ENGINE_OF_SOURCE, TEXT_CATEGORY, mlenergy_parallelism
from service.main import create_app

RESULTS = Path(__file__).resolve().parent / "results" / "recalibration.md"
SEED = 20261122


def request_body(m: EnergyMeasurement) -> dict[str, Any]:
    """The estimate request of one measured row (the mapping of service.fitting.request_inputs)."""
    par = mlenergy_parallelism(m)
    weights = m.weights_precision
    return {
        "model": m.model_id,
        "workload": {
            "batch_size": m.batch_size,
            "prompt_tokens": m.prompt_tokens,
            "output_tokens": m.output_tokens,
        },
        "hardware": {
            "gpu": m.gpu_id,
            "count": m.gpu_count,
            "parallelism": {"tensor": par.tensor, "expert": par.expert, "pipeline": 1},
        },
        "precision": {
            "weights": weights,
            "activations": "fp8" if weights == "fp8" else "bf16",
            "kv_cache": "bf16",
        },
        "serving": {"engine": ENGINE_OF_SOURCE[m.source]},
    }


@dataclass(frozen=True)
class Outcome:
    name: str
    split: str
    n_posted: int
    n_evaluated: int
    n_skipped: int
    calibration: dict[str, Any]
    mape_before: float
    mape_after: float
    model_version: str


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    return sum(abs(p - m) / m for p, m in zip(predicted, measured, strict=True)) / len(measured)


def run_split(
    name: str,
    split: str,
    posted: list[EnergyMeasurement],
    evaluated: list[EnergyMeasurement],
) -> Outcome:
    """One experiment on a fresh database."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'quotes.sqlite3'}"
        migrate.upgrade(url)
        settings = Settings(database_url=url, run_migrations_on_start=False, log_level="WARNING")
        with TestClient(create_app(settings)) as client:

            def quote(m: EnergyMeasurement) -> dict[str, Any] | None:
                response = client.post("/v1/estimate", json=request_body(m))
                return response.json() if response.status_code == 200 else None

            skipped = 0
            for m in posted:
                quoted = quote(m)
                if quoted is None:
                    skipped += 1
                    continue
                observation = {
                    "gpu_j": m.per_sequence_gpu_j * m.batch_size,
                    "measured_with": f"{m.source} (Zeus/NVML)",
                    "measured_at": "2026-11-22T00:00:00Z",
                }
                stored = client.post(
                    f"/v1/quotes/{quoted['quote_id']}/observations", json=observation
                )
                assert stored.status_code == 201, stored.text
            before = [(m, quote(m)) for m in evaluated]
            kept = [(m, q) for m, q in before if q is not None]
            skipped += len(before) - len(kept)
            created = client.post("/v1/calibrations", json={})
            assert created.status_code == 201, created.text
            calibration = created.json()
            after = [quote(m) for m, _ in kept]
            measured = [m.per_sequence_gpu_j for m, _ in kept]
            before_j = [q["energy"]["per_sequence_gpu_j"] for _, q in kept]
            after_j = [q["energy"]["per_sequence_gpu_j"] for q in after if q is not None]
            assert all(q is not None and q["calibration_id"] for q in after)
            return Outcome(
                name,
                split,
                len(posted),
                len(kept),
                skipped,
                calibration,
                mape(before_j, measured),
                mape(after_j, measured),
                kept[0][1]["model_version"],
            )


def split_rows(
    rows: list[EnergyMeasurement], rng: random.Random
) -> tuple[list[EnergyMeasurement], list[EnergyMeasurement]]:
    """Half the rows, drawn at random, to post; the rest to evaluate."""
    shuffled = rows[:]
    rng.shuffle(shuffled)
    half = len(shuffled) // 2
    return shuffled[:half], shuffled[half:]


def split_models(
    rows: list[EnergyMeasurement], rng: random.Random
) -> tuple[list[EnergyMeasurement], list[EnergyMeasurement]]:
    """Whole models: about half of the models' rows posted, the other models evaluated."""
    models = sorted({m.model_id for m in rows})
    rng.shuffle(models)
    posted_models = set(models[: (len(models) + 1) // 2])
    return (
        [m for m in rows if m.model_id in posted_models],
        [m for m in rows if m.model_id not in posted_models],
    )


SPLITS: dict[str, Callable[..., tuple[list[EnergyMeasurement], list[EnergyMeasurement]]]] = {
    "random half of the rows": split_rows,
    "whole models (about half posted)": split_models,
}


def measured_sets(data: Path) -> dict[str, list[EnergyMeasurement]]:
    rows = [m for m in load_mlenergy(data) if m.category == TEXT_CATEGORY]
    rows = [m for m in rows if m.pipeline_parallel == 1]
    models = load_model_catalog()

    def family(m: EnergyMeasurement) -> str | None:
        try:
            return models.get(m.model_id).family
        except LookupError:
            return None

    return {
        "ML.ENERGY v3 H100, Qwen family": [
            m for m in rows if m.source == "mlenergy-v3" and family(m) == "qwen"
        ],
        "ML.ENERGY v2 H100, every family": [
            m for m in rows if m.source == "mlenergy-v2" and m.gpu_id.startswith("H100")
        ],
    }


def segment_table(calibration: dict[str, Any]) -> list[str]:
    lines = ["| segment | n fitted | mean ln(measured/predicted) | weight n/(n+k) | factor |"]
    lines.append("|---|---|---|---|---|")
    for s in [calibration["global_correction"], *calibration["segments"]]:
        label = "global (fallback)" if s["gpu"] == "*" else f"{s['gpu']} x {s['family']}"
        lines.append(
            f"| {label} | {s['n']} | {s['mean_log_ratio']:+.3f} | {s['weight']:.3f} "
            f"| {s['factor']:.3f} |"
        )
    return lines


def report(outcomes: list[Outcome], command: str) -> str:
    lines = [
        "# Recalibration on measured data",
        "",
        f"Generated by `{command}`.",
        "",
        f"Estimator: `{outcomes[0].model_version}`. Each experiment starts from an empty "
        "database: every row of the measured set is quoted, the rows of the calibration part "
        "are posted as observations (GPU energy of the whole request = ML.ENERGY energy per "
        "request x batch size), `POST /v1/calibrations` fits with its defaults (segments GPU x "
        "model family, shrinkage k = 10, the newest 20 % of observations held out inside the "
        "fit), and the other rows are quoted again. MAPE of per-sequence GPU energy against the "
        "measurement; `holdout` is the fit's own score on its held-out observations.",
        "",
        "What the estimator saw: the analytical model's few power and efficiency coefficients "
        "were fitted on ML.ENERGY v2 and v3 rows of every family (no per-family or per-model "
        "parameter), so these rows are not unseen by it in the strict sense; the calibration is "
        "fitted only on the posted part and scored on rows it never saw. Data: ML.ENERGY "
        "leaderboard v2 and v3 (Apache-2.0).",
        "",
        "| measured set | split | posted | evaluated | MAPE before | MAPE after "
        "| holdout before | holdout after | flagged |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        c = o.calibration
        counts = c["observations"]
        flagged = counts["out_of_range"] + counts["outliers"]
        lines.append(
            f"| {o.name} | {o.split} | {o.n_posted} | {o.n_evaluated} | {o.mape_before:.1%} "
            f"| {o.mape_after:.1%} | {c['holdout_mape_before']:.1%} | "
            f"{c['holdout_mape_after']:.1%} | {flagged} |"
        )
    skipped = sum(o.n_skipped for o in outcomes)
    if skipped:
        lines += [
            "",
            f"Rows the service refused to quote (not enough GPU memory for the mapped "
            f"deployment, or a model outside the catalogue), left out: {skipped}.",
        ]
    deltas = [100 * (o.mape_after - o.mape_before) for o in outcomes]
    biases = [s["mean_log_ratio"] for o in outcomes for s in o.calibration["segments"]]
    lines += [
        "",
        f"Reading (this run: segment mean log ratios {min(biases):+.2f}..{max(biases):+.2f}, "
        f"MAPE change {min(deltas):+.1f}..{max(deltas):+.1f} points): on these sets the "
        "estimator's bias per GPU x family is small (within ~10 %), and what remains of its "
        "error is scatter between rows of one segment (batch size, output length, model "
        "size), which one multiplicative factor per segment cannot remove. The calibration "
        "therefore moves little (shrunk by n/(n+10)) and MAPE on the unseen rows barely "
        "changes: it does not help where the model is already unbiased, and the shrinkage "
        "keeps it from doing much harm. It pays off where a deployment differs systematically "
        "from what the model was fitted on (another GPU system, power cap, engine version), as "
        "the API tests show with a synthetic x2 bias; the mean log ratio per segment is the "
        "number to watch when deciding whether to activate a calibration.",
    ]
    for o in outcomes:
        lines += ["", f"## {o.name}, {o.split}", "", *segment_table(o.calibration)]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    outcomes = []
    for name, rows in measured_sets(args.data).items():
        for split, splitter in SPLITS.items():
            posted, evaluated = splitter(rows, random.Random(SEED))
            outcome = run_split(name, split, posted, evaluated)
            outcomes.append(outcome)
            print(
                f"{name} / {split}: MAPE {outcome.mape_before:.1%} -> {outcome.mape_after:.1%} "
                f"({outcome.n_posted} posted, {outcome.n_evaluated} evaluated)"
            )
    command = "python bench/recalibration_report.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(outcomes, command.strip()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
