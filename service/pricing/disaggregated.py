"""Disaggregated requests in the one pricing function (service.pricing.estimator): their prefill
worker's passes priced beside the array evaluation (service.core.disaggregated), their energy
the analytical one, their latency held by both workers' GPUs."""

from __future__ import annotations

from dataclasses import replace

from service.core.cost_model_errors import CostModelError
from service.core.disaggregated import (
    DisaggregatedEstimates,
    PrefillWorker,
    with_prefill_workers,
)
from service.core.estimates import WorkloadEstimates
from service.core.workload import Workload
from service.pricing.document import Latency
from service.pricing.energy import roofline_energy
from service.pricing.regressor.runtime import EnergyPrediction
from service.pricing.resolve import ResolvedRequest

ANALYTICAL_NOTE = (
    "disaggregated serving: energy is the analytical estimate (the learned regressor was "
    "trained on aggregated serving)"
)


def with_split_serving(
    estimates: WorkloadEstimates, resolved: list[ResolvedRequest]
) -> tuple[WorkloadEstimates, dict[int, CostModelError]]:
    """`estimates` (row j: `resolved[j]`) with each disaggregated row's prefill phase its
    prefill worker's, and by row number (`estimates.positions`) the error of each whose
    prefill worker cannot run it. Unchanged, and no work, when no row is disaggregated."""
    requests: dict[int, tuple[Workload, PrefillWorker]] = {
        j: (request.workload, request.prefill_worker)
        for j, request in enumerate(resolved)
        if request.prefill_worker is not None
    }
    if not requests:
        return estimates, {}
    split, errors = with_prefill_workers(estimates, requests)
    return split, {estimates.positions[j]: error for j, error in errors.items()}


def split_energies(
    estimates: WorkloadEstimates,
    energies: list[EnergyPrediction],
    resolved: list[ResolvedRequest],
    *,
    learned: bool,
) -> list[EnergyPrediction]:
    """`energies` with each disaggregated row's the analytical one (`learned`: the regressor
    answered the others, so say so)."""
    if not isinstance(estimates, DisaggregatedEstimates) or not estimates.prefills:
        return energies
    plans = estimates.plans
    for j in estimates.prefills:
        coefficients = plans.contexts[int(plans.context[j])].coefficients
        prefill_j, decode_j = estimates.phase_gpu_j[:, j].tolist()
        energies[j] = roofline_energy(prefill_j, decode_j, coefficients)
        if learned:
            resolved[j].notes.append(ANALYTICAL_NOTE)
    return energies


def split_latency(estimates: WorkloadEstimates, j: int, latency: Latency) -> Latency:
    """`latency` of row j, for a disaggregated row with its GPUs' time held (both workers',
    each over its own phase, in units of the quote's decode worker) and a warning naming the
    KV hand-off's link."""
    if not isinstance(estimates, DisaggregatedEstimates):
        return latency
    split = estimates.prefills.get(j)
    if split is None:
        return latency
    decode_gpus = WorkloadEstimates.gpu_count(estimates, j)
    transfer = split.transfer
    note = (
        f"disaggregated serving: prompt on a {split.gpus}-GPU prefill worker, its KV cache "
        f"({transfer.bytes / 1e6:.1f} MB) handed to the {decode_gpus}-GPU decode worker over "
        f"the {transfer.link} in {transfer.time_s * 1e3:.2f} ms"
    )
    return replace(
        latency,
        held_s=estimates.held_gpu_s(j) / decode_gpus,
        warnings=(*latency.warnings, note),
    )
