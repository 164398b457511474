"""Disaggregated serving: the prompt on a prefill worker, the decode on a decode worker.

A disaggregated request is priced as two rows of the one pricing path
(service.core.estimate.estimate_contexts): its decode worker's row (the request's deployment,
`Workload.decode_only`: every pass decode steps only, service.core.decode_worker) and its
prefill worker's (the same model, GPU and engine on the worker's own layout): one static
pass of the worker's `batch_size` prompts, the request's among them, each yielding its first
token. Then, with t_p and E_p that pass's time [s] and energy [J] (host path included), b the
request's sequences and B the pass's prompts, and the KV hand-off (service.core.kv_transfer):

    prefill_s (time to first token) = t_p + transfer_s + the engine's per-request host path
                                      + the wait for a prefill worker (joining a running
                                      server: service.core.prefill_queue)
    prefill_gpu_j = E_p * b / B + transfer_gpu_j
    decode_s, decode_gpu_j          = the decode worker's row's decode phase

The decode worker's row's own prefill phase is replaced by these. Each GPU is held only by its
own worker's phase: the quote's GPU-seconds held (embodied carbon) are prefill_s x the prefill
worker's GPUs plus decode_s x the decode worker's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from service.core.cost_model_errors import CostModelError
from service.core.estimate import estimate_contexts, pricing_context
from service.core.estimates import WorkloadEstimates
from service.core.kernel_table import TotalsSource
from service.core.kv_transfer import KvTransfer, kv_transfer
from service.core.pass_plans import PricingContext
from service.core.prefill_queue import prefill_load, prefill_wait_s
from service.core.results import PhaseCost, RequestEstimate
from service.core.workload import Deployment, Workload

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PrefillWorker:
    """The worker that computes a disaggregated request's prompt: its layout (the decode
    worker's GPU, model and engine) and the prompts one of its passes computes together
    (`batch_size`, the request's among them); `workers_per_decode_worker` such workers share
    the prompts of one decode worker (service.core.prefill_queue)."""

    deployment: Deployment
    batch_size: int = 1
    workers_per_decode_worker: float = 1.0  # prefill workers sharing a decode worker's prompts


@dataclass(frozen=True, slots=True)
class PrefillShare:
    """A disaggregated row's prefill: its pass's row in the prefill estimates, the request's
    share of that pass's energy, the KV hand-off, and the prefill worker's GPUs."""

    row: int
    share: float
    transfer: KvTransfer
    gpus: int
    request_overhead_s: float
    queue_s: float = 0.0


@dataclass(frozen=True, slots=True)
class _ScaledTotals:
    """A kernel table's counts times the request's share of the pass."""

    source: TotalsSource
    factor: float

    def totals_matrix(self) -> FloatArray:
        result: FloatArray = self.source.totals_matrix() * self.factor
        return result


@dataclass(eq=False)
class DisaggregatedEstimates(WorkloadEstimates):
    """WorkloadEstimates whose disaggregated rows (`prefills`, by row) carry their prefill
    worker's prefill phase (`prefill_passes`' rows) and KV hand-off in place of their own."""

    prefill_passes: WorkloadEstimates | None = None
    prefills: Mapping[int, PrefillShare] = field(default_factory=dict)

    def gpu_count(self, j: int) -> int:
        """GPUs workload j holds: both workers' for a disaggregated row."""
        split = self.prefills.get(j)
        return WorkloadEstimates.gpu_count(self, j) + (split.gpus if split else 0)

    def held_gpu_s(self, j: int) -> float:
        """GPU-seconds row j holds [GPU s]: each worker's GPUs over its own phase."""
        decode_gpus = WorkloadEstimates.gpu_count(self, j)
        prefill_s, decode_s = float(self.phase_s[0, j]), float(self.phase_s[1, j])
        split = self.prefills.get(j)
        if split is None:
            return (prefill_s + decode_s) * decode_gpus
        return prefill_s * split.gpus + decode_s * decode_gpus

    def item(self, j: int) -> RequestEstimate:
        """Row j as estimate_request returns it; a disaggregated row's prefill phase is its
        prefill worker's pass (energies and counts scaled by its share) and hand-off."""
        estimate = WorkloadEstimates.item(self, j)
        split = self.prefills.get(j)
        if split is None or self.prefill_passes is None:
            return estimate
        own = self.prefill_passes.item(split.row).prefill
        table = replace(
            own.table,
            gpu_j=own.table.gpu_j * split.share,
            kernel_gpu_j=own.table.kernel_gpu_j * split.share,
            counts=_ScaledTotals(own.table.counts, split.share),
        )
        prefill = PhaseCost(
            phase=own.phase,
            time_s=float(self.phase_s[0, j]),
            gpu_j=float(self.phase_gpu_j[0, j]),
            overhead_s=own.overhead_s + split.request_overhead_s + split.queue_s,
            steps=own.steps,
            table=table,
        )
        return replace(
            estimate, prefill=prefill, gpu_count=self.gpu_count(j), kv_transfer=split.transfer
        )


def prefill_pass(workload: Workload, worker: PrefillWorker) -> Workload:
    """The prefill worker's pass that computes `workload`'s prompts: a static batch of the
    worker's `batch_size` prompts (at least the request's), each yielding its first token."""
    return Workload(
        max(worker.batch_size, workload.batch_size),
        workload.prompt_tokens,
        1,
        workload.cached_prompt_tokens,
    )


def with_prefill_workers(
    estimates: WorkloadEstimates, requests: Mapping[int, tuple[Workload, PrefillWorker]]
) -> tuple[WorkloadEstimates, dict[int, CostModelError]]:
    """`estimates` with rows `requests` (row: its workload and prefill worker; each row's
    workload `decode_only`) priced disaggregated (see the module doc), and, by row, the error
    of each whose prefill worker cannot run it (the layout does not divide the model, or its
    prompts do not fit beside the weights): those rows keep their estimates and must be
    refused. All prefill passes are priced in one array evaluation."""
    if not requests:
        return estimates, {}
    errors: dict[int, CostModelError] = {}
    groups: list[tuple[PricingContext, list[Workload]]] = []
    rows: list[int] = []
    for j, (workload, worker) in requests.items():
        decode = estimates.plans.contexts[int(estimates.plans.context[j])]
        try:
            context = pricing_context(decode.plan.arch, worker.deployment, decode.coefficients)
        except CostModelError as refused:
            errors[j] = _on_prefill_worker(refused)
            continue
        groups.append((context, [prefill_pass(workload, worker)]))
        rows.append(j)
    if not groups:  # every prefill worker refused
        return estimates, errors
    passes, failed = estimate_contexts(groups)
    for number, error in failed.items():
        errors[rows[number]] = _on_prefill_worker(error)
    phase_s, phase_j = estimates.phase_s.copy(), estimates.phase_gpu_j.copy()
    kernel_s, kernel_j = estimates.kernel_s.copy(), estimates.kernel_gpu_j.copy()
    overhead_s = estimates.overhead_s.copy()
    prefills: dict[int, PrefillShare] = {}
    for k, number in enumerate(passes.positions):
        j = rows[number]
        if j in errors:
            continue
        workload, worker = requests[j]
        decode = estimates.plans.contexts[int(estimates.plans.context[j])]
        transfer = kv_transfer(
            decode.plan.arch,
            worker.deployment,
            decode.deployment,
            workload.batch_size,
            workload.prompt_tokens,
        )
        share = workload.batch_size / passes.sizes[k, 0]
        host_s = float(passes.plans.rows.request_overhead_s[k])
        pass_s = float(passes.phase_s[0, k])
        queue_s = 0.0
        if workload.concurrent_sequences is not None:  # prompts of a running server queue
            steps = float(estimates.decode_steps[j])
            step_s = float(estimates.phase_s[1, j]) / steps if steps else 0.0
            rho = prefill_load(
                float(workload.concurrent_sequences), workload.output_tokens, pass_s, step_s,
                float(passes.sizes[k, 0]), worker.workers_per_decode_worker,
            )  # fmt: skip
            queue_s = prefill_wait_s(rho, pass_s)
        gpus = worker.deployment.gpu_count
        prefills[j] = PrefillShare(k, share, transfer, gpus, host_s, queue_s)
        phase_s[0, j] = pass_s + queue_s + transfer.time_s + host_s
        phase_j[0, j] = passes.phase_gpu_j[0, k] * share + transfer.gpu_j
        kernel_s[0, j] = passes.kernel_s[0, k]
        kernel_j[0, j] = passes.kernel_gpu_j[0, k] * share
        overhead_s[0, j] = passes.overhead_s[0, k] + host_s + queue_s
    fields = {name: getattr(estimates, name) for name in estimates.__dataclass_fields__}
    fields.update(
        phase_s=phase_s,
        phase_gpu_j=phase_j,
        kernel_s=kernel_s,
        kernel_gpu_j=kernel_j,
        overhead_s=overhead_s,
        prefill_passes=passes,
        prefills=prefills,
    )
    return DisaggregatedEstimates(**fields), errors


def _on_prefill_worker(error: CostModelError) -> CostModelError:
    """`error`, its field moved from the request's hardware to its prefill worker."""
    name = error.field or "hardware"
    if name.startswith("hardware"):
        error.field = "serving.disaggregated.prefill" + name.removeprefix("hardware")
    return error
