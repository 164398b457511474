"""The measured rows the regressor learns from: ML.ENERGY energy per request, each row encoded
by `request_features` with its serving engine's fitted coefficients (and, as time-only rows,
aiconfigurator's serving runs: offline.training.serving_rows)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from offline.fitting.datasets import EnergyMeasurement, load_mlenergy
from offline.fitting.request_inputs import RequestInputs, mlenergy_inputs
from service.catalog import load_engine_coefficients, load_gpu_catalog, load_model_catalog
from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError
from service.core.dtypes import gemm_compute_key
from service.core.estimate import estimate_request
from service.core.memory import active_parameter_count
from service.core.workload import Deployment, Workload
from service.pricing.continuous_energy import static_reading
from service.pricing.regressor.feature_spec import NODE_STATIC_FEATURES
from service.pricing.regressor.features import (
    RAW_COLUMNS,
    RequestFeatures,
    phase_node_block_of,
    phase_raw,
    request_features,
    safe_log,
)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class TrainingRow:
    """One measured request with its features and what the baselines need.

    Attributes:
        measured_j: measured GPU energy of the whole request [J] (per request x batch); NaN
            for a serving run (time only: its energy loss is masked).
        analytical_j: the analytical estimate of it [J] (static reading: what the features
            describe and the per-phase corrections apply to).
        served_j: the analytical estimate the service quotes for the same row [J] (continuous
            reading, per request x batch): a quote with the regressor is served_j times the
            regressor's factor on the static reading (continuous_energy.corrected_energy).
        measured_tpot_s, served_tpot_s: measured time per output token and the service's
            analytical one (continuous reading) [s].
        merged: features with prefill and decode summed per node (the no-phase-split ablation).
        flops_tdp_per_peak_j: total tensor FLOPs x TDP / dense peak [J] (LLMCarbon at 100 %).
        active_parameters: parameters one token passes through.
    """

    row_ref: str
    source: str
    family: str
    model_id: str
    gpu_id: str
    batch_size: int
    output_tokens: int
    measured_j: float
    analytical_j: float
    served_j: float
    measured_tpot_s: float
    served_tpot_s: float
    features: RequestFeatures
    merged: RequestFeatures
    flops_tdp_per_peak_j: float
    active_parameters: float
    engine: str  # the host-overhead profile of the engine that ran it (its own, measured)

    @property
    def target_j(self) -> float:
        """The static-reading energy whose factor over `analytical_j` makes the served quote
        the measured energy [J]: what the regressor is trained to predict, so that training
        and serving agree."""
        return self.measured_j * self.analytical_j / self.served_j


def training_row(
    m: EnergyMeasurement, inputs: RequestInputs, coefficients: CostModelCoefficients
) -> TrainingRow:
    """Encode one measured ML.ENERGY row (raises CostModelError when the core cannot price
    it): `encoded_row` of its inputs, energy and time per output token."""
    return encoded_row(
        MeasuredRequest(
            m.row_ref,
            m.source,
            inputs.engine,
            inputs.family,
            inputs.model_id,
            m.per_sequence_gpu_j,
            m.time_per_output_token_s,
        ),
        inputs.arch,
        inputs.workload,
        inputs.deployment,
        coefficients,
    )


@dataclass(frozen=True, slots=True)
class MeasuredRequest:
    """What was measured of one request, with its labels: energy per sequence [J] (NaN where
    none was measured: a row that trains the time head only) and time per output token [s]."""

    row_ref: str
    source: str
    engine: str
    family: str
    model_id: str
    per_sequence_gpu_j: float
    time_per_output_token_s: float


def encoded_row(
    m: MeasuredRequest,
    arch: ModelArchitecture,
    served_workload: Workload,
    deployment: Deployment,
    coefficients: CostModelCoefficients,
) -> TrainingRow:
    """Encode one measured request (raises CostModelError when the core cannot price it). The
    regressor learns the static reading of the row (a batch of its running sequences,
    continuous_energy.static_reading): the one the service corrects a continuous quote by.
    The continuous reading is priced as the service prices it (memory checked)."""
    served = estimate_request(arch, served_workload, deployment, coefficients)
    workload = static_reading(served_workload)
    estimate = estimate_request(arch, workload, deployment, coefficients, check_memory=False)
    features = request_features(arch, workload, deployment, coefficients)
    raw = [phase_raw(t) for t in (estimate.prefill.table, estimate.decode.table)]
    static = features.node_x[:, : len(NODE_STATIC_FEATURES)]
    merged = RequestFeatures(
        node_x=np.concatenate([static, phase_node_block_of(raw[0] + raw[1])], axis=1),
        adjacency=features.adjacency,
        global_x=features.global_x,
        log_analytical_j=np.array([safe_log(estimate.gpu_j)]),
    )
    precision = deployment.precision
    peak = deployment.gpu.gemm_peak_flops_per_s(
        gemm_compute_key(precision.weights, precision.activations)
    )
    flops = sum(float(r[:, RAW_COLUMNS.index("tensor_flops")].sum()) for r in raw)
    return TrainingRow(
        row_ref=m.row_ref,
        source=m.source,
        family=m.family,
        model_id=m.model_id,
        gpu_id=deployment.gpu.id,
        batch_size=workload.batch_size,
        output_tokens=workload.output_tokens,
        measured_j=m.per_sequence_gpu_j * workload.batch_size,
        analytical_j=estimate.gpu_j,
        served_j=served.per_sequence_gpu_j * workload.batch_size,
        measured_tpot_s=m.time_per_output_token_s,
        served_tpot_s=served.time_per_output_token_s,
        features=features,
        merged=merged,
        flops_tdp_per_peak_j=flops * deployment.gpu.tdp_w / peak,
        active_parameters=active_parameter_count(arch),
        engine=m.engine,
    )


def load_training_rows(
    data_dir: Path,
    limit: int | None = None,
    engines: Mapping[str, CostModelCoefficients] | None = None,
) -> tuple[list[TrainingRow], list[str]]:
    """Every ML.ENERGY row the core can represent, encoded with `engines` (default: the fitted
    coefficients per serving engine), and why the others were left out. With `limit`, an evenly
    spaced slice of that many rows (every family, smoke runs)."""
    models, gpus = load_model_catalog(), load_gpu_catalog()
    if engines is None:
        engines = load_engine_coefficients()
    rows: list[TrainingRow] = []
    skipped: list[str] = []
    for m in load_mlenergy(data_dir):
        inputs = mlenergy_inputs(m, models, gpus)
        if isinstance(inputs, str):
            skipped.append(inputs)
            continue
        try:
            rows.append(training_row(m, inputs, engines[inputs.engine]))
        except CostModelError as error:
            skipped.append(f"{m.row_ref}: {error}")
    if limit is not None:
        rows = rows[:: max(1, len(rows) // limit)][:limit]
    return rows, skipped


def log_measured(rows: list[TrainingRow]) -> FloatArray:
    return np.array([math.log(r.measured_j) for r in rows])


def log_served(rows: list[TrainingRow], log_static_j: FloatArray) -> FloatArray:
    """The quotes the service would give [log J]: each row's served analytical energy moved by
    the factor `log_static_j` (predicted static-reading energy) puts on its analytical_j."""
    served = np.array([math.log(r.served_j / r.analytical_j) for r in rows])
    return np.asarray(log_static_j + served, dtype=np.float64)


def log_tpot_ratio(rows: list[TrainingRow]) -> FloatArray:
    """log(measured / served analytical time per output token); NaN where either is not
    positive (a request without a decode step)."""
    return np.array(
        [
            math.log(r.measured_tpot_s / r.served_tpot_s)
            if r.measured_tpot_s > 0 and r.served_tpot_s > 0
            else math.nan
            for r in rows
        ]
    )
