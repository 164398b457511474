"""The ONNX export computes what the torch model computes, on graphs it was not trained on."""

from __future__ import annotations

import numpy as np
import pytest
from regressor_support import training_rows

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from offline.training.export import MAX_ABS_DIFFERENCE, max_abs_difference, onnx_bytes  # noqa: E402
from offline.training.fit import TrainConfig, Variant, train_ensemble  # noqa: E402


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
