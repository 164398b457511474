"""The learned correction of a continuous-batch quote (`serving.concurrent_sequences` given).

The regressor was trained on ML.ENERGY rows read as static batches of their running sequences,
so its inputs for a continuous-batch estimate would be unlike any it learned from. What it
learned is a correction of the analytical energy of a replica in that state: a continuous quote
is corrected by the factor the regressor gives the same replica read the old way (a static
batch of the C running sequences, same prompt, cache hits and output, memory unchecked as in
training), applied to the continuous estimate's own analytical energy, interval included. The
phase split is the continuous estimate's own. The time head's factor is the static reading's
too: it was trained as the static reading's correction of the continuous (served) time per
output token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from service.core.estimate import estimate_contexts
from service.core.estimates import WorkloadEstimates
from service.core.workload import Workload
from service.pricing.regressor.runtime import EnergyPrediction


def static_reading(workload: Workload) -> Workload:
    """The continuous workload read as a static batch of its running sequences."""
    running = workload.concurrent_sequences or workload.batch_size
    return Workload(
        running, workload.prompt_tokens, workload.output_tokens, workload.cached_prompt_tokens
    )


def with_static_corrections(
    estimates: WorkloadEstimates,
    workloads: Sequence[Workload],
    predictions: list[EnergyPrediction],
    predict: Callable[[WorkloadEstimates], list[EnergyPrediction]],
) -> list[EnergyPrediction]:
    """`predictions` (one per row of `estimates`, whose workloads are `workloads`), each
    continuous workload's replaced by its analytical energy corrected as its static reading is
    (`predict` prices the static readings, all in one pass, memory unchecked as in training)."""
    continuous = [j for j, w in enumerate(workloads) if w.concurrent_sequences is not None]
    if not continuous:
        return predictions
    plans = estimates.plans
    readings, _ = estimate_contexts(
        [
            (plans.contexts[int(plans.context[j])], [static_reading(workloads[j])])
            for j in continuous
        ],
        check_memory=False,
    )
    static = predict(readings)
    static_j = readings.gpu_j.tolist()
    phase_j = estimates.phase_gpu_j.T.tolist()
    for row, j in enumerate(continuous):
        prefill_j, decode_j = phase_j[j]
        predictions[j] = corrected_energy(static[row], static_j[row], prefill_j, decode_j)
    return predictions


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
        tpot_factor=static_prediction.tpot_factor,
    )
