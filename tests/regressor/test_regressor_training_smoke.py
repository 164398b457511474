"""The whole pipeline on a small slice, a few steps: rows, cross-validation, report, training,
export, metadata, and the runtime serving what came out. CI does not retrain the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from regressor_support import DATA_DIR, measurements, request_inputs

pytest.importorskip("torch")
pytest.importorskip("onnx")
if not DATA_DIR.is_dir():
    pytest.skip(f"measured data not present at {DATA_DIR}", allow_module_level=True)

from offline.training.train import main
from service.catalog import load_engine_coefficients
from service.pricing.regressor.features import Features, request_features
from service.pricing.regressor.runtime import EnergyRegressor


@pytest.mark.slow
def test_tiny_training_run_end_to_end(tmp_path: Path) -> None:
    argv = ["--data", str(DATA_DIR), "--out", str(tmp_path), "--limit", "56", "--epochs", "12"]
    argv += ["--members", "2", "--hidden", "8", "--no-ablations", "--quiet"]
    argv += ["--fold-coefficients", "fixed"]
    assert main(argv) == 0
    for name in ("energy_gnn.onnx", "energy_gnn.json", "energy_gnn_validation.md"):
        assert (tmp_path / name).is_file()
    metadata = json.loads((tmp_path / "energy_gnn.json").read_text(encoding="utf-8"))
    assert metadata["training_rows"] == 56
    assert metadata["onnx_check"]["max_abs_difference"] <= 1e-5
    assert "GNN" in metadata["validation"]["held_out_families"]
    regressor = EnergyRegressor.load(tmp_path / "energy_gnn.onnx", tmp_path / "energy_gnn.json")
    inputs = request_inputs(measurements()[0])
    coefficients = load_engine_coefficients()[inputs.engine]
    features = request_features(inputs.arch, inputs.workload, inputs.deployment, coefficients)
    (prediction,) = regressor.predict(Features.of_requests([features]))
    assert prediction.gpu_j > 0
