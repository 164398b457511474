"""Recalibration learning a GPU held out of the cost model's fit, from observations of energy and
time posted to a real service instance.

    python bench/recalibration_report.py --data ../shared/data

The held-out GPU is the A100-SXM4-40GB (ML.ENERGY v2, vLLM 0.5.4: the only GPU besides the H100
with measured energy). The cost model is refitted without every A100 row and kernel sample
(`offline.fitting.cross_validation.refit_without`, the leave-one-GPU-out fold of
`fit_cost_model`), its coefficients written to a temporary file and served by `create_app`
(`cost_model_coefficients_path`, analytical quotes: `use_regressor` off, since the shipped
regressor was trained on A100 rows; a fresh SQLite database, the open dev mode, in-process with
the TestClient). The A100's text rows, mapped as shared/data/README.md says (one request joining
a server of `round(avg batch)` running sequences), in a fixed random order (the data carry no
time), are quoted; the first half are posted as observations (`POST
/v1/quotes/{id}/observations`: `gpu_j` the measured energy per request, `total_s` the measured
time per output token x output tokens), `POST /v1/calibrations` fits with its defaults and
activates, and the second half are quoted again and scored: energy per request against the
measured one, time per output token against the measured one. The same again, in a fresh
database, with only the first 20 of the posted half. H100 rows quoted before and after show
that the A100's calibration moves no other GPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.recalibration_coverage import (  # noqa: E402
    energy_inside,
    level_bounds,
    nested_coverage,
    posted_fit,
    total_inside,
    tpot_inside,
)
from bench.recalibration_text import plot_experiments, report  # noqa: E402
from bench.report_file import command_line, write_report  # noqa: E402
from offline.fitting.datasets import DEFAULT_DATA_DIR, EnergyMeasurement, load_mlenergy  # noqa: E402
from offline.fitting.fold_coefficients import fold_coefficients  # noqa: E402
from offline.fitting.request_inputs import (  # noqa: E402
    ENGINE_OF_SOURCE,
    TEXT_CATEGORY,
    mlenergy_parallelism,
)
from service.catalog import load_model_catalog  # noqa: E402
from service.config import Settings  # noqa: E402
from service.db import migrate  # noqa: E402
from service.main import create_app  # noqa: E402
from service.pricing.calibration import CalibrationPoint, fit_corrections  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "recalibration.md"
HELD_OUT_GPU = "A100-SXM4-40GB"
SEED = 20261126
POSTED_SHARE = 0.5
FEW = 20
H100_CHECKS = 20
MEASURED_AT = "2026-11-22T00:00:00Z"


def request_body(m: EnergyMeasurement) -> dict[str, Any]:
    """One request joining a server of round(avg batch) sequences (shared/data/README.md)."""
    par = mlenergy_parallelism(m)
    weights = m.weights_precision
    return {
        "model": m.model_id,
        "workload": {
            "batch_size": 1,
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
        "serving": {
            "engine": ENGINE_OF_SOURCE[m.source],
            "concurrent_sequences": max(1, m.batch_size),
        },
    }


def experiment(
    posted: list[EnergyMeasurement],
    scored: list[EnergyMeasurement],
    checks: list[EnergyMeasurement],
    coefficients: Path,
    url: str,
) -> dict[str, Any]:
    """Quote, post `posted`, calibrate, quote `scored` and `checks` again (fresh database)."""
    with analytical_client(coefficients, url) as client:

        def quote(m: EnergyMeasurement) -> dict[str, Any]:
            response = client.post("/v1/estimate", json=request_body(m))
            if response.status_code != 200:
                raise RuntimeError(f"{m.row_ref}: {response.text}")
            answer: dict[str, Any] = response.json()
            return answer

        posted_quotes = []
        levels = {}  # observation id -> the level's log bounds of its quote
        for m in posted:
            q = quote(m)
            posted_quotes.append(q)
            observation = {
                "gpu_j": m.per_sequence_gpu_j,
                "total_s": m.time_per_output_token_s * m.output_tokens,
                "measured_with": f"{m.source} (Zeus/NVML)",
                "measured_at": MEASURED_AT,
            }
            stored = client.post(f"/v1/quotes/{q['quote_id']}/observations", json=observation)
            if stored.status_code != 201:
                raise RuntimeError(stored.text)
            levels[stored.json()["observation_id"]] = level_bounds(q)
        before = [quote(m) for m in scored]
        checks_before = [quote(m) for m in checks]
        created = client.post("/v1/calibrations", json={})
        if created.status_code != 201:
            raise RuntimeError(created.text)
        # the rule judged on the posted rows alone (recalibration_coverage)
        fitted = posted_fit(url, client.app.state.services.estimator)
        rules = {q: nested_coverage(fitted["residuals"], levels, q) for q in ("energy", "total")}
        after = [quote(m) for m in scored]
        checks_after = [quote(m) for m in checks]
    return {
        "posted": len(posted),
        "measured_j": [m.per_sequence_gpu_j for m in scored],
        "measured_tpot_s": [m.time_per_output_token_s for m in scored],
        "before_j": [q["energy"]["per_sequence_gpu_j"] for q in before],
        "after_j": [q["energy"]["per_sequence_gpu_j"] for q in after],
        "before_tpot_s": [q["latency"]["time_per_output_token_s"] for q in before],
        "after_tpot_s": [q["latency"]["time_per_output_token_s"] for q in after],
        "measured_total_s": [m.time_per_output_token_s * m.output_tokens for m in scored],
        "before_total_s": [q["latency"]["total_s"] for q in before],
        "after_total_s": [q["latency"]["total_s"] for q in after],
        "prefill_share": [q["latency"]["prefill_s"] / q["latency"]["total_s"] for q in before],
        "tpot_inside_before": tpot_inside(before, scored),
        "tpot_inside_after": tpot_inside(after, scored),
        "energy_inside_before": energy_inside(before, scored),
        "energy_inside_after": energy_inside(after, scored),
        "total_inside_before": total_inside(before, scored),
        "total_inside_after": total_inside(after, scored),
        "held_out_after": after[0]["validation"]["held_out"] if after else {},
        "quantiles": fitted["quantiles"],
        "scored_levels": [level_bounds(q) for q in before],
        "rules": rules,
        "checks_moved": sum(
            1
            for b, a in zip(checks_before, checks_after, strict=True)
            if b["energy"]["gpu_j"] != a["energy"]["gpu_j"]
            or b["latency"]["total_s"] != a["latency"]["total_s"]
        ),
        "checks": len(checks),
        "model_version": before[0]["model_version"] if before else "",
        "calibration": created.json(),
        "scalar_after_j": scalar_baseline(posted, posted_quotes, scored, before),
    }


def scalar_baseline(
    posted: list[EnergyMeasurement],
    posted_quotes: list[dict[str, Any]],
    scored: list[EnergyMeasurement],
    scored_quotes: list[dict[str, Any]],
) -> list[float]:
    """The scored rows' energy per request under one shrunk factor per GPU x family fitted on
    the posted rows' energy alone (`fit_corrections`, k = 10): the recalibration this service
    had before the physical refit, as a baseline."""
    models = load_model_catalog()

    def family(m: EnergyMeasurement) -> str:
        return models.find(m.model_id)[0].family

    points = [
        CalibrationPoint(
            f"p{i}",
            m.gpu_id,
            family(m),
            q["energy"]["per_sequence_gpu_j"],
            m.per_sequence_gpu_j,
            datetime.fromisoformat(MEASURED_AT),
        )
        for i, (m, q) in enumerate(zip(posted, posted_quotes, strict=True))
    ]
    corrections = fit_corrections(points, shrinkage_k=10.0)
    return [
        q["energy"]["per_sequence_gpu_j"] * corrections.factor_for(m.gpu_id, family(m))
        for m, q in zip(scored, scored_quotes, strict=True)
    ]


def analytical_client(coefficients: Path, url: str) -> TestClient:
    """The service on a freshly migrated database at `url`, analytical estimates only, with the
    cost-model coefficients of `coefficients`."""
    migrate.upgrade(url)
    settings = Settings(
        database_url=url,
        run_migrations_on_start=False,
        log_level="WARNING",
        use_regressor=False,
        cost_model_coefficients_path=coefficients,
    )
    return TestClient(create_app(settings))


def quotable(
    rows: list[EnergyMeasurement], coefficients: Path, url: str
) -> list[EnergyMeasurement]:
    """The rows the service quotes (a deployment that does not fit in memory is refused)."""
    with analytical_client(coefficients, url) as client:
        return [m for m in rows if client.post("/v1/estimate", json=request_body(m)).is_success]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    rows = [
        m
        for m in load_mlenergy(args.data)
        if m.category == TEXT_CATEGORY and m.pipeline_parallel == 1
    ]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        print("refitting the cost model without the A100 ...", flush=True)
        coefficients = fold_coefficients(args.data, HELD_OUT_GPU, folder)
        held = [m for m in rows if m.gpu_id == HELD_OUT_GPU]
        held = quotable(held, coefficients, f"sqlite:///{folder / 'probe.sqlite3'}")
        refused = sum(1 for m in rows if m.gpu_id == HELD_OUT_GPU) - len(held)
        random.Random(SEED).shuffle(held)
        n_posted = round(POSTED_SHARE * len(held))
        posted, scored = held[:n_posted], held[n_posted:]
        h100 = [m for m in rows if m.gpu_id == "H100-SXM5-80GB" and m.source == "mlenergy-v2"]
        checks = random.Random(SEED).sample(h100, H100_CHECKS)
        results = {}
        for label, sample in (("half", posted), ("20", posted[:FEW])):
            url = f"sqlite:///{folder / (label + '.sqlite3')}"
            results[label] = experiment(sample, scored, checks, coefficients, url)
            print(f"{label}: done", flush=True)
    method = __doc__.split("\n\n")[2].replace("\n", " ")
    text = report(results, command_line(), method, SEED, refused)
    write_report(args.out, text)
    if args.json is not None:
        args.json.write_text(json.dumps(results), encoding="utf-8")
    plot_experiments(results, args.out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
