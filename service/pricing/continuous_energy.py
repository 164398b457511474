"""The learned correction of a continuous-batch quote (`serving.concurrent_sequences` given).

The regressor was trained on ML.ENERGY rows read as static batches of their running sequences,
so its inputs for a continuous-batch estimate would be unlike any it learned from. What it
learned is a correction of the analytical energy of a replica in that state: a continuous quote
is corrected by the factor the regressor gives the same replica read the old way (a static
batch of the C running sequences, same prompt, cache hits and output, memory unchecked as in
training), applied to the continuous estimate's own analytical energy, interval included. The
phase split is the continuous estimate's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.estimate import estimate_workloads
from service.core.estimates import WorkloadEstimates
from service.core.workload import Deployment, Workload
from service.pricing.regressor.runtime import EnergyPrediction


@dataclass(frozen=True, slots=True)
class StaticReadings:
    """The static readings of a group's continuous workloads.

    Attributes:
        rows: for each estimate row of the group, its row in `estimates`, or -1 if static.
        estimates: the static readings' analytical estimates.
    """

    rows: tuple[int, ...]
    estimates: WorkloadEstimates


def static_reading(workload: Workload) -> Workload:
    """The continuous workload read as a static batch of its running sequences."""
    running = workload.concurrent_sequences or workload.batch_size
    return Workload(
        running, workload.prompt_tokens, workload.output_tokens, workload.cached_prompt_tokens
    )


def static_readings(
    arch: ModelArchitecture,
    workloads: Sequence[Workload],
    deployment: Deployment,
    coefficients: CostModelCoefficients,
) -> StaticReadings | None:
    """The static readings of the continuous ones among `workloads` (the estimate rows of a
    group, in order), or None when none is continuous."""
    rows: list[int] = []
    readings: list[Workload] = []
    for workload in workloads:
        if workload.concurrent_sequences is None:
            rows.append(-1)
        else:
            rows.append(len(readings))
            readings.append(static_reading(workload))
    if not readings:
        return None
    estimates, _ = estimate_workloads(arch, readings, deployment, coefficients, check_memory=False)
    return StaticReadings(tuple(rows), estimates)


def corrected_energy(
    static_prediction: EnergyPrediction,
    static_analytical_j: float,
    prefill_gpu_j: float,
    decode_gpu_j: float,
) -> EnergyPrediction:
    """The continuous estimate's analytical phase energies [J] corrected by the factor the
    regressor gives its static reading (`static_prediction` of `static_analytical_j`)."""
    factor = static_prediction.gpu_j / static_analytical_j
    gpu_j = prefill_gpu_j + decode_gpu_j
    return EnergyPrediction(
        gpu_j=gpu_j * factor,
        gpu_j_low=gpu_j * static_prediction.gpu_j_low / static_analytical_j,
        gpu_j_high=gpu_j * static_prediction.gpu_j_high / static_analytical_j,
        prefill_gpu_j=prefill_gpu_j * factor,
        decode_gpu_j=decode_gpu_j * factor,
        lower_quantile=static_prediction.lower_quantile,
        upper_quantile=static_prediction.upper_quantile,
    )


def with_static_corrections(
    groups: Sequence[tuple[WorkloadEstimates, StaticReadings | None]],
    predictions: list[list[EnergyPrediction]],
) -> list[list[EnergyPrediction]]:
    """The predictions of each group (estimates, static readings): the first len(groups)
    lists of `predictions`, each continuous workload's replaced by its analytical energy
    corrected as its static reading is (the lists after, one per group that has readings)."""
    own, extra = predictions[: len(groups)], iter(predictions[len(groups) :])
    for (estimates, readings), predicted in zip(groups, own, strict=True):
        if readings is None:
            continue
        static = next(extra)
        static_j = readings.estimates.gpu_j.tolist()
        phase_j = estimates.phase_gpu_j.T.tolist()
        for j, row in enumerate(readings.rows):
            if row >= 0:
                prefill_j, decode_j = phase_j[j]
                predicted[j] = corrected_energy(static[row], static_j[row], prefill_j, decode_j)
    return own
