"""Training choices of energy-gnn 2026.11.4: per-series weight balance, denied input features
(served: their first-layer weights are zero) and the inner leave-family-out validation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from regressor_support import training_rows

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from offline.training.export import MAX_ABS_DIFFERENCE, max_abs_difference, onnx_bytes  # noqa: E402
from offline.training.fit import (  # noqa: E402
    TrainConfig,
    Variant,
    balanced_weights,
    predict_log_j,
    predict_log_tpot_ratio,
    train_ensemble,
)
from offline.training.inner_cv import inner_scores  # noqa: E402
from offline.training.validation import Priors, fixed_folds  # noqa: E402
from service.pricing.regressor.encoding import INPUT_NAMES, request_inputs  # noqa: E402
from service.pricing.regressor.feature_spec import GLOBAL_FEATURE_GROUPS, GLOBAL_FEATURES  # noqa: E402


def test_balanced_weights_give_every_series_the_same_total() -> None:
    rows = training_rows()
    rows = [rows[0], rows[0], rows[0], rows[1]]  # one series of three rows, one of one
    weights = np.ones(4)
    assert np.array_equal(balanced_weights(rows, weights, 0.0), weights)
    balanced = balanced_weights(rows, weights, 1.0)
    assert balanced.mean() == pytest.approx(1.0)
    assert balanced[:3].sum() == pytest.approx(balanced[3])


def test_denied_precision_bits_do_not_change_the_served_output() -> None:
    torch.set_num_threads(1)
    rows = training_rows()
    config = TrainConfig(hidden=8, members=2, epochs=20, progress=False, validation_share=0.2)
    model = train_ensemble(rows, np.ones(len(rows)), Variant("x", precision_bits=False), config)
    exported = onnx_bytes(model, rows[:2])
    assert max_abs_difference(model, exported, rows) <= MAX_ABS_DIFFERENCE
    inputs = request_inputs([r.features for r in rows], model.normalisation)
    changed = dict(inputs)
    changed["global_x"] = inputs["global_x"].copy()
    for name in GLOBAL_FEATURE_GROUPS["precision"]:
        changed["global_x"][..., GLOBAL_FEATURES.index(name)] += 3.0
    with torch.no_grad():
        serving = model.serving()
        before = serving(*(torch.from_numpy(inputs[n]) for n in INPUT_NAMES))[0].numpy()
        after = serving(*(torch.from_numpy(changed[n]) for n in INPUT_NAMES))[0].numpy()
    assert np.array_equal(before, after)
    assert np.allclose(predict_log_j(model, rows), before, atol=1e-6)


@pytest.mark.slow
def test_inner_scores_never_score_the_outer_family() -> None:
    torch.set_num_threads(1)
    rows = training_rows()
    folds = fixed_folds(rows)
    priors = Priors(np.array([7e9, 2e10]), np.array([100.0, 300.0]))
    config = TrainConfig(hidden=4, members=1, epochs=2, progress=False)
    scores = inner_scores(folds, replace(Variant("x"), focused=False), config, priors)
    assert set(scores) == {r.family for r in rows}
    for outer, score in scores.items():
        assert score["rows"] == sum(r.family != outer for r in rows)
        assert score["mape_pct"] >= 0.0


@pytest.mark.slow
def test_inner_scores_without_a_time_head_score_the_analytical_tpot() -> None:
    """Time weight 0: no TPOT correction, so each outer fold's TPOT score is the served
    analytical TPOT's MAPE over the other families' rows (|served / measured - 1|, worked out
    here from the rows); the criterion is the mean of the energy and TPOT MAPEs, and each
    outer fold trains with the penalty it is given."""
    torch.set_num_threads(1)
    rows = training_rows()
    folds = fixed_folds(rows)
    priors = Priors(np.array([7e9, 2e10]), np.array([100.0, 300.0]))
    config = TrainConfig(hidden=4, members=1, epochs=2, progress=False, time_weight=0.0)
    families = sorted(folds)
    penalties = {families[0]: 0.7}
    scores = inner_scores(folds, replace(Variant("x"), focused=False), config, priors, penalties)
    for outer, score in scores.items():
        errors = [
            abs(r.served_tpot_s / r.measured_tpot_s - 1.0)
            for r in rows
            if r.family != outer and r.measured_tpot_s > 0 and r.served_tpot_s > 0
        ]
        assert score["tpot_rows"] == len(errors) > 0
        assert score["tpot_mape_pct"] == pytest.approx(100 * sum(errors) / len(errors))
        mean = (score["mape_pct"] + score["tpot_mape_pct"]) / 2
        assert score["criterion_pct"] == pytest.approx(mean)
        assert score["correction_penalty"] == (0.7 if outer == families[0] else 0.03)


def test_a_time_head_leaves_the_exported_energy_interface_as_it_was() -> None:
    """With a time-per-output-token head the network has one more output; the ONNX export
    still carries the two energy outputs the runtime reads, equal to torch's, and the time
    correction is read in training only (none without the head)."""
    torch.set_num_threads(1)
    rows = training_rows()
    config = TrainConfig(hidden=8, members=2, epochs=20, progress=False, validation_share=0.2)
    timed = train_ensemble(rows, np.ones(len(rows)), Variant("x"), replace(config, time_weight=1.0))
    assert timed.gnn.config.time_outputs == 1
    exported = onnx_bytes(timed, rows[:2])
    assert max_abs_difference(timed, exported, rows) <= MAX_ABS_DIFFERENCE
    correction = predict_log_tpot_ratio(timed, rows)
    assert correction.shape == (len(rows),) and np.all(correction != 0.0)
    plain = train_ensemble(rows, np.ones(len(rows)), Variant("x"), config)
    assert np.array_equal(predict_log_tpot_ratio(plain, rows), np.zeros(len(rows)))
