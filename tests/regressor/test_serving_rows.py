"""aiconfigurator's serving runs as time-only training rows: which runs become rows, that each
row carries the TPOT the service quotes, that the energy loss masks them, and which grouped
folds hold them out."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from regressor_support import DATA_DIR, training_rows

torch = pytest.importorskip("torch")

from offline.fitting.silicon_rows import point_estimator, silicon_request  # noqa: E402
from offline.training.fit import (  # noqa: E402
    Targets,
    TrainConfig,
    Variant,
    predict_log_j,
    predict_log_tpot_ratio,
    row_errors,
    time_only_weighted,
    train_ensemble,
)
from offline.training.grouped import engine_masks, gpu_masks  # noqa: E402
from offline.training.serving_rows import (  # noqa: E402
    SOURCE,
    family_fold_profile,
    load_serving_rows,
    serving_runs,
    shipped_profiles,
)
from service.catalog.engines import DEFAULT_ENGINE, load_engine_coefficients  # noqa: E402

needs_data = pytest.mark.skipif(not DATA_DIR.is_dir(), reason="needs ../shared/data")
H100, H200 = "H100-SXM5-80GB", "H200-SXM-141GB"


@needs_data
def test_every_aggregated_run_the_service_prices_is_one_row_per_engine_and_gpu() -> None:
    rows, skipped = load_serving_rows(DATA_DIR)
    # Aggregated runs without pipeline parallelism in the CSV, counted per backend and system,
    # less those the service refuses: sglang H200 Qwen3.5-397B at TP 64 (15 runs: 64 tensor
    # ranks do not divide its attention heads), trtllm H200 DeepSeek-R1/V3 at attention DP 64
    # (6 + 1: experts spread over the DP group), vllm H200 Qwen3-235B-FP8 on one GPU (13: ~220
    # GiB of weights on a 141 GB GPU).
    assert Counter((r.engine, r.gpu_id) for r in rows) == {
        ("trtllm", H100): 489,
        ("trtllm", H200): 257 - 7,
        ("vllm", H100): 237,
        ("vllm", H200): 336 - 13,
        ("sglang", H100): 84,
        ("sglang", H200): 190 - 15,
    }
    assert len(skipped) == 15 + 7 + 13
    assert len(serving_runs(DATA_DIR)) == len(rows) + len(skipped)
    assert all(r.source == SOURCE and math.isnan(r.measured_j) for r in rows)
    assert all(r.measured_tpot_s > 0 for r in rows)


@needs_data
def test_a_serving_row_carries_the_tpot_the_service_quotes_for_its_run() -> None:
    """Encoded with the profile it is priced with: the shipped one, and a held-out engine's
    runs with the default profile, as the service prices an engine without measurements."""
    runs = serving_runs(DATA_DIR)
    for held_out in (None, "sglang"):
        rows, _ = load_serving_rows(DATA_DIR, held_out_engine=held_out)
        by_ref = {r.row_ref: r for r in rows}
        coefficients = dict(load_engine_coefficients())  # the loader caches its dict
        if held_out is not None:
            coefficients[held_out] = coefficients[DEFAULT_ENGINE]
        estimator = point_estimator(coefficients=coefficients)
        chosen = [run for run in runs if run.row["backend"] == "sglang"][::20]
        quoted = estimator.price([silicon_request(run.row, "sglang") for run in chosen])
        for run, result in zip(chosen, quoted, strict=True):
            row = by_ref.get(f"aiconfigurator/silicon_sample_h100_h200.csv:{run.line}")
            if row is None:  # refused
                continue
            latency = result.document.as_dict()["latency"]  # type: ignore[union-attr]
            assert row.served_tpot_s == pytest.approx(latency["time_per_output_token_s"], 1e-12)
            assert row.measured_tpot_s == float(run.row["silicon_tpot_ms"]) / 1e3


@needs_data
def test_a_fold_that_holds_out_no_run_refits_the_shipped_profile() -> None:
    """The per-fold refit is the fit that made the shipped profiles: with no run of the
    family left out, every coefficient comes back (to the fit's tolerance)."""
    for engine, shipped in shipped_profiles().items():
        refitted = family_fold_profile(DATA_DIR, engine, "a family no run has")
        for name in ("decode_step_overhead_s", "decode_overhead_per_sequence_s",
                     "ttft_wave_share", "request_overhead_s", "tensor_efficiency"):  # fmt: skip
            expected = getattr(shipped.roofline, name)
            assert getattr(refitted.roofline, name) == pytest.approx(expected, rel=1e-6, abs=1e-15)


def test_a_row_without_energy_is_scored_on_its_time_alone() -> None:
    """Huber, delta 0.1: 0.5 e^2 for |e| <= 0.1, else 0.1 (|e| - 0.05). Row 0 has both
    targets: energy off by 0.05 (0.00125), TPOT by 0.3 (0.025). Row 1 is a serving run: its
    energy prediction is off by 2.0 from the placeholder 0 (masked), its TPOT by 0.02
    (0.0002). Time weight 2 doubles the time terms."""
    # log phase energies [R=2, K=1, O=2]: one phase at -inf leaves the request the other.
    log_phase = torch.tensor([[[1.05, -math.inf]], [[2.0, -math.inf]]])
    time = torch.tensor([[[0.3]], [[0.02]]])
    targets = Targets(
        log_j=torch.tensor([[1.0], [0.0]]),
        has_energy=torch.tensor([[1.0], [0.0]]),
        log_tpot_ratio=torch.tensor([[0.0], [0.0]]),
        has_tpot=torch.tensor([[1.0], [1.0]]),
    )
    loss = torch.nn.HuberLoss(reduction="none", delta=0.1)
    errors = row_errors(log_phase, time, targets, loss, time_weight=2.0)
    assert errors[:, 0].tolist() == pytest.approx([0.00125 + 2 * 0.025, 2 * 0.0002], rel=1e-5)
    no_time = row_errors(log_phase, time, targets, loss, time_weight=0.0)
    assert no_time[:, 0].tolist() == pytest.approx([0.00125, 0.0], rel=1e-5)


def _serving(row_index: int, engine: str) -> object:
    """A synthetic row of regressor_support made a serving run of `engine` (no energy)."""
    return replace(training_rows()[row_index], source=SOURCE, engine=engine, measured_j=math.nan)


def test_the_serving_weight_scales_only_the_rows_without_energy() -> None:
    rows = training_rows()[:3]
    rows[1] = replace(rows[1], source=SOURCE, engine="vllm", measured_j=math.nan)
    weighted = time_only_weighted(rows, np.array([2.0, 4.0, 1.0]), 0.25)
    assert weighted.tolist() == [2.0, 1.0, 1.0]


def test_serving_rows_train_the_time_head_and_leave_the_energy_finite() -> None:
    rows = training_rows()
    served = [replace(r, source=SOURCE, engine="sglang", measured_j=math.nan) for r in rows]
    config = TrainConfig(hidden=4, members=2, epochs=3, progress=False, time_weight=1.0)
    model = train_ensemble(rows + served, np.ones(2 * len(rows)), Variant("x"), config)
    assert np.isfinite(predict_log_j(model, rows)).all()
    assert np.isfinite(predict_log_tpot_ratio(model, served)).all()
    assert all(np.isfinite(entry["train"]) for entry in model.log)


def test_grouped_folds_hold_out_the_serving_runs_of_their_gpu_and_engine() -> None:
    # regressor_support: row 0 Llama on H100 (v3), row 2 Mixtral on A100 (v2).
    rows = [*training_rows(), _serving(0, "sglang"), _serving(0, "vllm")]
    test, train = gpu_masks(rows, H100)  # type: ignore[arg-type]
    assert np.flatnonzero(test).tolist() == [5, 8, 9]  # the v2 H100 row and both runs
    assert np.flatnonzero(train).tolist() == [2, 3, 7]
    test, train = engine_masks(rows, "sglang")  # type: ignore[arg-type]
    assert np.flatnonzero(test).tolist() == [8]
    assert np.flatnonzero(train).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 9]
