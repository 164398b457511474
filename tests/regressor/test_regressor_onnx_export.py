"""The ONNX export computes what the torch model computes, on graphs it was not trained on."""

from __future__ import annotations

import numpy as np
import pytest
from regressor_support import training_rows

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

import onnxruntime as ort  # noqa: E402

from offline.training.export import (  # noqa: E402
    MAX_ABS_DIFFERENCE,
    exported_outputs,
    max_abs_difference,
    onnx_bytes,
)
from offline.training.fit import (  # noqa: E402
    TrainConfig,
    Variant,
    predict_log_tpot_ratio,
    train_ensemble,
)
from service.pricing.regressor.encoding import (  # noqa: E402
    OUTPUT_NAMES,
    TIME_OUTPUT_NAME,
    request_inputs,
)


def test_onnx_matches_torch_on_held_out_graphs() -> None:
    torch.set_num_threads(1)
    rows = training_rows()
    train, held_out = rows[:6], rows[6:]
    config = TrainConfig(hidden=8, members=3, epochs=30, progress=False, validation_share=0.2)
    model = train_ensemble(train, np.ones(len(train)), Variant("test"), config)
    exported = onnx_bytes(model, train[:2])
    assert max_abs_difference(model, exported, held_out) <= MAX_ABS_DIFFERENCE
    # Dynamic batch and node count: the whole set at once, graphs of different sizes padded.
    assert len({r.features.node_x.shape[0] for r in rows}) > 1
    assert max_abs_difference(model, exported, rows) <= MAX_ABS_DIFFERENCE


def test_ablation_variants_are_not_exported() -> None:
    rows = training_rows()[:4]
    config = TrainConfig(hidden=4, members=1, epochs=2, progress=False)
    model = train_ensemble(rows, np.ones(4), Variant("x", roofline=False), config)
    with pytest.raises(ValueError, match="served"):
        onnx_bytes(model, rows)


def test_time_head_exports_as_a_third_output() -> None:
    """A model trained with a time head (time_weight > 0) exports its TPOT log-correction as
    `log_tpot_correction` [B, 1]: ONNX equals torch on every output, and that output is the
    members' mean time output that grouped validation scored (predict_log_tpot_ratio)."""
    torch.set_num_threads(1)
    rows = training_rows()
    train, held_out = rows[:6], rows[6:]
    config = TrainConfig(
        hidden=8, members=3, epochs=30, progress=False, validation_share=0.2, time_weight=1.0
    )
    model = train_ensemble(train, np.ones(len(train)), Variant("test"), config)
    assert exported_outputs(model) == (*OUTPUT_NAMES, TIME_OUTPUT_NAME)
    exported = onnx_bytes(model, train[:2])
    assert max_abs_difference(model, exported, rows) <= MAX_ABS_DIFFERENCE
    session = ort.InferenceSession(exported, providers=["CPUExecutionProvider"])
    inputs = request_inputs([r.features for r in held_out], model.normalisation)
    (log_tpot,) = session.run([TIME_OUTPUT_NAME], inputs)
    assert log_tpot.shape == (len(held_out), 1)
    torch_tpot = predict_log_tpot_ratio(model, held_out)
    assert np.max(np.abs(log_tpot[:, 0] - torch_tpot)) <= MAX_ABS_DIFFERENCE
    assert np.max(np.abs(torch_tpot)) > 0.0  # the head is trained, not the zero of no head
