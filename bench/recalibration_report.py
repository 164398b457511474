"""Recalibration on rows the quoting regressor never saw: per held-out model family, the
leave-family-out regressor quotes the family through a real service instance, the older half of
the family's rows are posted as observations, a calibration is fitted, and the error on the
newer half is compared before and after.

    python bench/recalibration_report.py --data ../shared/data

For each of the 7 model families of ML.ENERGY: an ensemble is trained exactly as the shipped one
(`offline.training.train`'s design and settings) on every other family's rows, exported to ONNX
with its metadata in a temporary folder, and loaded by `create_app` through the normal settings
(`onnx_model_path`, `onnx_metadata_path`; a fresh SQLite database, the open dev mode), run
in-process with the TestClient. The family's rows, in a fixed random order (the data carry no
time: the order stands for arrival), are quoted; the first half are posted as observations
(`POST /v1/quotes/{id}/observations`, GPU energy of the whole request = energy per request x
batch), `POST /v1/calibrations` fits with its defaults (GPU x family segments, shrinkage k = 10,
the newest 20 % of the posted observations held out inside the fit) and activates, and the
second half are quoted again. Writes bench/results/recalibration.md and .png.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.recalibration_text import errors, plot_families, report  # noqa: E402
from offline.fitting.datasets import DEFAULT_DATA_DIR, EnergyMeasurement, load_mlenergy  # noqa: E402
from offline.fitting.request_inputs import ENGINE_OF_SOURCE, mlenergy_parallelism  # noqa: E402
from offline.training.dataset import TrainingRow, load_training_rows  # noqa: E402
from offline.training.export import onnx_bytes  # noqa: E402
from offline.training.fit import TrainConfig, train_ensemble  # noqa: E402
from offline.training.train import CHOSEN, DEFAULTS, VERSION, fold_penalty, load_priors  # noqa: E402
from offline.training.validation import Priors  # noqa: E402
from service.config import Settings  # noqa: E402
from service.db import migrate  # noqa: E402
from service.main import create_app  # noqa: E402
from service.pricing.regressor.feature_spec import feature_spec, feature_spec_sha256  # noqa: E402
from service.pricing.regressor.runtime import sha256_bytes  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "recalibration.md"
SEED = 20261122
POSTED_SHARE = 0.5
MEASURED_AT = "2026-11-22T00:00:00Z"


def request_body(m: EnergyMeasurement) -> dict[str, Any]:
    """The estimate request of one measured row (the mapping of offline.fitting.request_inputs)."""
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


def export_fold_model(
    rows: list[TrainingRow], family: str, config: TrainConfig, folder: Path, priors: Priors
) -> tuple[Path, Path, str]:
    """Train the ensemble without `family`, write its ONNX and metadata into `folder`."""
    train = [r for r in rows if r.family != family]
    config = replace(config, correction_penalty=fold_penalty(family))  # as the report's fold
    model = train_ensemble(train, priors.weights(train, CHOSEN.focused), CHOSEN, config, family)
    model_bytes = onnx_bytes(model, train[:4])
    shipped = json.loads((ROOT / "models" / "energy_gnn.json").read_text(encoding="utf-8"))
    version = f"{VERSION} without {family}"
    metadata = {
        "model": "energy_gnn",
        "version": version,
        "onnx_sha256": sha256_bytes(model_bytes),
        "feature_spec": feature_spec(),
        "feature_spec_sha256": feature_spec_sha256(),
        "normalisation": model.normalisation.as_dict(),
        "interval": shipped["interval"],  # bounds are not scored here
        "coefficients": shipped["coefficients"],
    }
    onnx_path, metadata_path = folder / f"{family}.onnx", folder / f"{family}.json"
    onnx_path.write_bytes(model_bytes)
    metadata_path.write_text(json.dumps(metadata), encoding="utf-8")
    return onnx_path, metadata_path, version


def family_experiment(
    measurements: list[EnergyMeasurement], paths: tuple[Path, Path, str], folder: Path
) -> dict[str, Any]:
    """Quote, post the older part, calibrate, quote the newer part again (fresh database)."""
    onnx_path, metadata_path, version = paths
    url = f"sqlite:///{folder / (onnx_path.stem + '.sqlite3')}"
    migrate.upgrade(url)
    settings = Settings(
        database_url=url,
        run_migrations_on_start=False,
        log_level="WARNING",
        onnx_model_path=onnx_path,
        onnx_metadata_path=metadata_path,
    )
    with TestClient(create_app(settings)) as client:

        def quote(m: EnergyMeasurement) -> dict[str, Any] | None:
            response = client.post("/v1/estimate", json=request_body(m))
            return response.json() if response.status_code == 200 else None

        quoted = [(m, quote(m)) for m in measurements]
        kept = [(m, q) for m, q in quoted if q is not None]
        if any(q["model_version"].split("+")[0] != version for _, q in kept):
            raise RuntimeError(f"the service did not quote with {version!r}")
        n_posted = round(POSTED_SHARE * len(kept))
        older, newer = kept[:n_posted], kept[n_posted:]
        for m, q in older:
            observation = {
                "gpu_j": m.per_sequence_gpu_j * m.batch_size,
                "measured_with": f"{m.source} (Zeus/NVML)",
                "measured_at": MEASURED_AT,
            }
            stored = client.post(f"/v1/quotes/{q['quote_id']}/observations", json=observation)
            if stored.status_code != 201:
                raise RuntimeError(stored.text)
        created = client.post("/v1/calibrations", json={})
        if created.status_code != 201:
            raise RuntimeError(created.text)
        after = [quote(m) for m, _ in newer]
        if any(q is None or not q["calibration_id"] for q in after):
            raise RuntimeError("a calibrated quote failed or carries no calibration")
        return {
            "refused": len(quoted) - len(kept),
            "posted": len(older),
            "measured": [m.per_sequence_gpu_j for m, _ in newer],
            "before": [q["energy"]["per_sequence_gpu_j"] for _, q in newer],
            "after": [q["energy"]["per_sequence_gpu_j"] for q in after if q is not None],
            "sources": [m.source for m, _ in newer],
            "calibration": created.json(),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--members", type=int, default=DEFAULTS.members)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    rows, _ = load_training_rows(args.data)
    by_ref = {m.row_ref: m for m in load_mlenergy(args.data)}
    priors = load_priors(args.data)
    config = replace(DEFAULTS, members=args.members, progress=False)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for family in sorted({r.family for r in rows}):
            paths = export_fold_model(rows, family, config, folder, priors)
            measurements = [by_ref[r.row_ref] for r in rows if r.family == family]
            random.Random(f"{SEED}:{family}").shuffle(measurements)
            results[family] = family_experiment(measurements, paths, folder)
            before = errors(results[family]["before"], results[family]["measured"])["mape"]
            after = errors(results[family]["after"], results[family]["measured"])["mape"]
            print(f"{family}: MAPE {before:.1f} % -> {after:.1f} %", flush=True)
    command = "python bench/recalibration_report.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    method = __doc__.split("\n\n")[2].replace("\n", " ")
    args.out.write_text(report(results, command.strip(), method, SEED), encoding="utf-8")
    plot_families(results, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
