"""Serving the learned energy regressor with onnxruntime (no torch).

A model trained with a time head (`train --time-weight`) also gives a log-correction of the
served analytical time per output token; the metadata names the engine profiles it was trained
on (`design.time_head_engines`), the only ones the estimator applies it to.

Load once per process with explicit thread counts; the loader refuses a model whose feature
specification differs from this code's (its features would be misread) and a model file whose
bytes are not the ones its metadata describes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from service.pricing.regressor.encoding import (
    OUTPUT_NAMES,
    TIME_OUTPUT_NAME,
    Normalisation,
    model_inputs,
    output_names,
)
from service.pricing.regressor.feature_spec import feature_spec_sha256
from service.pricing.regressor.features import Features

MODELS_DIR = Path(__file__).resolve().parents[3] / "models"
DEFAULT_MODEL_PATH = MODELS_DIR / "energy_gnn.onnx"
DEFAULT_METADATA_PATH = MODELS_DIR / "energy_gnn.json"

# Requests per onnxruntime call when a batch is large. A whole 1000-request batch makes every
# intermediate tensor tens of MB (members x nodes x hidden per request), so the run streams
# through memory; slices this size keep them in a core's L2 cache, where one call per slice
# costs little (docs/history: the batch benchmark measured the gain).
INFERENCE_SLICE = 64


class RegressorLoadError(RuntimeError):
    """The model cannot be served by this code (feature spec or file digest mismatch)."""


@dataclass(frozen=True, slots=True)
class EnergyPrediction:
    """The regressor's GPU energy of one request (all sequences, all GPUs) [J].

    `gpu_j_low`/`gpu_j_high` are `gpu_j` times the `lower_quantile`/`upper_quantile` of
    measured/predicted on model families held out of training; prefill + decode = gpu_j.
    `tpot_factor` is exp of the time head's output, the learned factor on the served analytical
    time per output token (1.0 from a model without a time head, and from the roofline).
    """

    gpu_j: float
    gpu_j_low: float
    gpu_j_high: float
    prefill_gpu_j: float
    decode_gpu_j: float
    lower_quantile: float
    upper_quantile: float
    tpot_factor: float = 1.0


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class EnergyRegressor:
    """An onnxruntime session over the exported GNN, with its normalisation and interval."""

    def __init__(self, session: ort.InferenceSession, metadata: dict[str, Any]) -> None:
        self._session = session
        # The compiled session's run, called directly: the Python wrapper's run checks the feed's
        # names and the WebGPU graph-capture state on every call, a fifth of a single
        # request's run time here; our feed is built by model_inputs with INPUT_NAMES, once.
        self._run = session._sess.run
        self.metadata = metadata
        self.version: str = metadata["version"]
        self.normalisation = Normalisation.from_dict(metadata["normalisation"])
        interval = metadata["interval"]
        self.low_ratio = float(interval["low_ratio"])
        self.high_ratio = float(interval["high_ratio"])
        self.lower_quantile = float(interval["lower_quantile"])
        self.upper_quantile = float(interval["upper_quantile"])
        self.coefficients_version: str = metadata["coefficients"]["version"]
        self.time_head = TIME_OUTPUT_NAME in metadata["outputs"]
        self._outputs = list(output_names(self.time_head))
        engines = metadata.get("design", {}).get("time_head_engines", ())
        self.time_head_engines: frozenset[str] = frozenset(engines if self.time_head else ())
        """Engine profiles the time head was trained on: its correction applies to these."""

    @property
    def session(self) -> ort.InferenceSession:
        """The onnxruntime session (inputs: encoding.INPUT_NAMES, outputs: OUTPUT_NAMES, then
        TIME_OUTPUT_NAME with a time head)."""
        return self._session

    @classmethod
    def load(
        cls,
        model_path: Path = DEFAULT_MODEL_PATH,
        metadata_path: Path = DEFAULT_METADATA_PATH,
        intra_op_threads: int = 1,
        inter_op_threads: int = 1,
    ) -> EnergyRegressor:
        """Open the model; raises RegressorLoadError when it does not fit this code."""
        metadata = json.loads(Path(metadata_path).read_text(encoding="utf-8"))
        expected = feature_spec_sha256()
        if metadata.get("feature_spec_sha256") != expected:
            raise RegressorLoadError(
                f"{metadata_path}: feature spec sha256 {metadata.get('feature_spec_sha256')!r} "
                f"does not match this code's {expected!r}; retrain with "
                "`python -m offline.training.train`"
            )
        if feature_spec_sha256(metadata.get("feature_spec")) != expected:
            raise RegressorLoadError(
                f"{metadata_path}: stored feature spec does not hash to its sha256"
            )
        if metadata.get("outputs") not in (list(output_names(False)), list(output_names(True))):
            raise RegressorLoadError(
                f"{metadata_path}: outputs {metadata.get('outputs')!r} are not "
                f"{list(OUTPUT_NAMES)!r} (and {TIME_OUTPUT_NAME!r} with a time head)"
            )
        model_bytes = Path(model_path).read_bytes()
        if sha256_bytes(model_bytes) != metadata.get("onnx_sha256"):
            raise RegressorLoadError(f"{model_path}: sha256 differs from {metadata_path}")
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = inter_op_threads
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # No memory patterns: onnxruntime plans and keeps one pattern (and one block of its CPU
        # arena) per distinct set of input shapes, and ours vary with every pass (requests per
        # pass x nodes of the largest graph), so a long-running worker kept growing its arena as
        # rarer shapes came along. Without them each run allocates from the arena as it goes,
        # no slower for inputs this small.
        options.enable_mem_pattern = False
        session = ort.InferenceSession(
            model_bytes, sess_options=options, providers=["CPUExecutionProvider"]
        )
        return cls(session, metadata)

    def predict(self, features: Features) -> list[EnergyPrediction]:
        """GPU energies [J], with intervals and phase split, of the requests of `features`, in
        order: inputs built in one pass, run INFERENCE_SLICE requests at a time."""
        inputs = model_inputs(features, self.normalisation)
        total = inputs["log_analytical_j"].shape[0]
        if total <= INFERENCE_SLICE:  # one call, as most requests need
            outputs = self._run(self._outputs, inputs, None)
        else:
            slices = [
                self._run(self._outputs, _rows(inputs, at, at + INFERENCE_SLICE), None)
                for at in range(0, total, INFERENCE_SLICE)
            ]
            outputs = [np.concatenate(out) for out in zip(*slices, strict=True)]
        log_gpu_j, log_phase = (np.asarray(out, dtype=np.float64) for out in outputs[:2])
        tpot = None if not self.time_head else np.asarray(outputs[2], dtype=np.float64)
        return self._predictions(log_gpu_j, log_phase, tpot)

    def _predictions(
        self, log_gpu_j: np.ndarray, log_phase: np.ndarray, log_tpot: np.ndarray | None
    ) -> list[EnergyPrediction]:
        """EnergyPredictions from the model's outputs. Plain float arithmetic: a handful of
        numpy calls on arrays of one row cost more than the numbers themselves (the single
        estimate's case), and a batch's thousand rows take well under a millisecond this way."""
        totals = np.exp(log_gpu_j.reshape(-1)).tolist()
        split = log_phase.ndim == 2 and log_phase.shape[1] >= 2
        phases = np.exp(log_phase[:, :2]).tolist() if split else None
        tpot_factors = [1.0] * len(totals) if log_tpot is None else np.exp(log_tpot[:, 0]).tolist()
        low, high = self.low_ratio, self.high_ratio
        predictions = []
        for i, total in enumerate(totals):
            if phases is None:  # the model does not split phases: all decode
                prefill, decode = 0.0, total
            else:
                first, rest = phases[i]
                share = first / (first + rest)
                prefill, decode = total * share, total * (1.0 - share)
            predictions.append(
                EnergyPrediction(
                    total,
                    total * low,
                    total * high,
                    prefill,
                    decode,
                    self.lower_quantile,
                    self.upper_quantile,
                    tpot_factors[i],
                )
            )
        return predictions


def _rows(inputs: dict[str, np.ndarray], start: int, stop: int) -> dict[str, np.ndarray]:
    """The model's inputs for requests `start` to `stop` (a slice of each batch axis)."""
    return {name: array[start:stop] for name, array in inputs.items()}
