"""Export a trained ensemble to ONNX (dynamic batch and node count) and check it against torch."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

from offline.training.dataset import TrainingRow
from offline.training.fit import TrainedModel, variant_features
from service.pricing.regressor.encoding import (
    INPUT_NAMES,
    TIME_OUTPUT_NAME,
    output_names,
    request_inputs,
)

OPSET = 17
MAX_ABS_DIFFERENCE = 1e-5

_DYNAMIC_AXES = {
    "node_x": {0: "batch", 2: "nodes"},
    "adjacency": {0: "batch", 2: "nodes", 3: "nodes"},
    "readout_weight": {0: "batch", 3: "nodes"},
    "global_x": {0: "batch"},
    "log_analytical_j": {0: "batch"},
    "log_gpu_j": {0: "batch"},
    "log_phase_gpu_j": {0: "batch"},
    TIME_OUTPUT_NAME: {0: "batch"},
}


def exported_outputs(model: TrainedModel) -> tuple[str, ...]:
    """The ONNX outputs of `model`: the energy ones, then the time head's if it has one."""
    return output_names(model.gnn.config.time_outputs > 0)


def onnx_bytes(model: TrainedModel, example_rows: Sequence[TrainingRow]) -> bytes:
    """The serving model as ONNX (opset 17), traced on `example_rows`."""
    if not (model.variant.roofline and model.variant.phase_split):
        raise ValueError("only variants that see every feature of the encoder are served")
    inputs = request_inputs(variant_features(example_rows, model.variant), model.normalisation)
    args = tuple(torch.from_numpy(inputs[name]) for name in INPUT_NAMES)
    names = {*INPUT_NAMES, *exported_outputs(model)}
    with tempfile.TemporaryDirectory() as scratch, warnings.catch_warnings():
        path = Path(scratch) / "energy_gnn.onnx"
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            model.serving(),
            args,
            path,
            dynamo=False,
            opset_version=OPSET,
            input_names=list(INPUT_NAMES),
            output_names=list(exported_outputs(model)),
            dynamic_axes={k: v for k, v in _DYNAMIC_AXES.items() if k in names},
            do_constant_folding=True,
        )
        return path.read_bytes()


def max_abs_difference(
    model: TrainedModel, onnx_model: bytes, rows: Sequence[TrainingRow]
) -> float:
    """Largest |onnxruntime - torch| over every output (energy and, with a time head, the
    time correction) for `rows` (one batch, padded)."""
    inputs = request_inputs(variant_features(rows, model.variant), model.normalisation)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(onnx_model, options, providers=["CPUExecutionProvider"])
    onnx_out = session.run(list(exported_outputs(model)), inputs)
    with torch.no_grad():
        torch_out = model.serving()(*(torch.from_numpy(inputs[n]) for n in INPUT_NAMES))
    return max(
        float(np.max(np.abs(o - t.numpy()))) for o, t in zip(onnx_out, torch_out, strict=True)
    )
