"""Analytical estimates of N workloads, each of its own context, in array operations.

`price_workloads` evaluates the contexts' cached CostPlans for all of them at once (N may be 1);
`WorkloadEstimates` holds the results as arrays, and `item(j)` is workload j's RequestEstimate
(service.core.estimate.estimate_workloads validates the workloads and checks memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from service.core.decode_worker import decode_worker_mix
from service.core.host_overhead import decode_host_s, overhead_gpu_j
from service.core.kernel_table import KernelTable
from service.core.pass_plans import ContextRows, PassPlans
from service.core.phase import PhaseArrays, phase_arrays
from service.core.plan import CostPlan
from service.core.results import MemoryFootprint, Phase, PhaseCost, RequestEstimate
from service.core.schedule import KvSchedule, kv_cache_bytes_many, kv_schedule
from service.core.steady_state import PassMix, pass_mix, prompt_to_decode_energy
from service.core.terms import WorkloadTerms, workload_terms
from service.core.work import WORK_FIELDS
from service.core.workload import Workload

FloatArray = npt.NDArray[np.float64]
_PHASES = (Phase.PREFILL, Phase.DECODE)


@dataclass(frozen=True, slots=True, eq=False)
class SummedCounts:
    """A phase's basis terms summed over its executions; totals each kernel's counts on demand."""

    plan: CostPlan
    basis_sum: FloatArray
    padded_sum: FloatArray

    def totals_matrix(self) -> FloatArray:
        """(kernels, WORK_FIELDS) counts summed over the phase's executions and all GPUs."""
        return self.plan.count_totals(self.basis_sum, self.padded_sum)


# Not frozen: built on every pass, and a frozen dataclass's __init__ sets each field through
# object.__setattr__ (several times the cost); treated as read-only all the same.
@dataclass(eq=False)
class WorkloadEstimates:
    """Estimates of N workloads, each of its own context (model, deployment, engine), as
    arrays ([2, N]: prefill and decode; [2, N, kernels] per kernel, padded to one width, see
    service.core.pass_plans); `item(j)` is the j-th as a RequestEstimate.

    Attributes:
        plans: the contexts' plans and each row's context.
        sizes: [N, 3] each workload's batch size, prompt and output tokens.
        positions: [N] each workload's index in the caller's list.
        phase_s, phase_gpu_j: each phase's wall-clock time [s] and GPU energy [J].
        overhead_s: host-side part of phase_s [s].
        kernel_s, kernel_gpu_j: the kernels' part of phase_s and phase_gpu_j.
        arrays: per-kernel totals of each phase.
        terms: the workloads' basis terms (summed over executions when counts are asked for).
        kv_cache_bytes: [N] KV cache per GPU while the workload runs [B] (static: at the
            longest; continuous: its running sequences' mean).
        decode_steps: [N] decode passes the request's sequences wait through (all waves).
        schedule: what runs at once (service.core.schedule), with a note per workload.
    """

    plans: PassPlans
    sizes: FloatArray
    positions: tuple[int, ...]
    phase_s: FloatArray
    phase_gpu_j: FloatArray
    overhead_s: FloatArray
    kernel_s: FloatArray
    kernel_gpu_j: FloatArray
    arrays: PhaseArrays
    terms: WorkloadTerms
    kv_cache_bytes: FloatArray
    decode_steps: FloatArray
    schedule: KvSchedule

    @property
    def count(self) -> int:
        return int(self.sizes.shape[0])

    def gpu_count(self, j: int) -> int:
        """GPUs workload j's deployment holds."""
        return int(self.plans.rows.held[j])

    def warnings_of(self, j: int) -> tuple[str, ...]:
        """The deployment's warnings, then workload j's schedule note if it has one."""
        warnings = self.plans.contexts[int(self.plans.context[j])].warnings
        note = self.schedule.notes[j]
        return (*warnings, note) if note else warnings

    @property
    def gpu_j(self) -> FloatArray:
        """[N] GPU energy of each whole request [J]."""
        result: FloatArray = self.phase_gpu_j.sum(axis=0)
        return result

    @cached_property
    def _phase_sums(self) -> tuple[FloatArray, FloatArray]:
        """[2, N, BASIS] terms summed over each phase's executions: (real, padded rows). Only
        counts need them (features, the verbose breakdown), so they are summed on demand."""
        rows = self.plans.rows
        return self.terms.phase_sums(rows.window, rows.any_window)

    def totals(self) -> FloatArray:
        """[2, N, kernels, WORK_FIELDS] counts summed over executions and all GPUs (0 on the
        padding)."""
        basis_sum, padded_sum = self._phase_sums
        plans = self.plans
        totals = np.zeros((2, plans.count, plans.width, len(WORK_FIELDS)))
        for c, members in plans.groups():
            plan = plans.contexts[c].plan
            totals[:, members, : len(plan.nodes)] = plan.count_totals(
                basis_sum[:, members], padded_sum[:, members]
            )
        return totals

    def memory(self, j: int) -> MemoryFootprint:
        rows = self.plans.rows
        return MemoryFootprint(
            float(rows.weight_bytes[j]),
            float(self.kv_cache_bytes[j]),
            float(rows.capacity_bytes[j]),
        )

    def item(self, j: int) -> RequestEstimate:
        """The j-th workload's estimate as estimate_request returns it."""
        batch = self.sizes[j, 0]
        times, joules = self.phase_s[:, j].tolist(), self.phase_gpu_j[:, j].tolist()
        steps = int(self.decode_steps[j])
        phases = [
            PhaseCost(
                phase=_PHASES[p],
                time_s=times[p],
                gpu_j=joules[p],
                overhead_s=float(self.overhead_s[p, j]),
                steps=int(self.schedule.waves[j]) if p == 0 else steps,
                table=self._table(p, j),
            )
            for p in (0, 1)
        ]
        return RequestEstimate(
            prefill=phases[0],
            decode=phases[1],
            gpu_j=joules[0] + joules[1],
            total_s=times[0] + times[1],
            time_per_output_token_s=times[1] / steps if steps else 0.0,
            batch_size=int(batch),
            gpu_count=self.gpu_count(j),
            memory=self.memory(j),
            warnings=self.warnings_of(j),
        )

    def _table(self, p: int, j: int) -> KernelTable:
        plan, arrays = self.plans.plan_of(j), self.arrays
        kernels = slice(0, len(plan.nodes))
        basis_sum, padded_sum = self._phase_sums
        return KernelTable(
            phase=_PHASES[p],
            nodes=plan.nodes,
            executions=arrays.executions[p, j, kernels],
            kernel_time_s=float(self.kernel_s[p, j]),
            kernel_gpu_j=float(self.kernel_gpu_j[p, j]),
            time_s=arrays.time_s[p, j, kernels],
            gpu_j=arrays.gpu_j[p, j, kernels],
            compute_s=arrays.compute_s[p, j, kernels],
            memory_s=arrays.memory_s[p, j, kernels],
            network_s=arrays.network_s[p, j, kernels],
            compute_key=plan.compute_key,
            gpu=plan.gpu,
            counts=SummedCounts(plan, basis_sum[p, j], padded_sum[p, j]),
        )


def price_workloads(
    plans: PassPlans,
    workloads: Sequence[Workload],
    positions: Sequence[int],
    *,
    check_memory: bool = True,
) -> WorkloadEstimates:
    """Estimates of valid `workloads` (validated by the caller), row j of `plans`' context.
    With `check_memory` a workload whose KV cache does not fit at once is priced as scheduled
    (service.core.schedule); without, as if memory were unlimited."""
    rows = plans.rows
    values = np.array(
        [
            (
                w.batch_size,
                w.prompt_tokens,
                w.output_tokens,
                w.cached_prompt_tokens,
                # a decode worker runs its own sequences when no running ones are given
                w.concurrent_sequences or (w.batch_size if w.decode_only else 0),
                w.decode_only,
            )
            for w in workloads
        ],
        dtype=np.float64,
    ).reshape(-1, 6)
    batch, prompt, output, cached, asked, decode_worker = values.T
    continuous = asked > 0
    # Flags of the whole pass read from the workloads (cheaper than an array's any()).
    any_decode_only = any(w.decode_only for w in workloads)
    any_continuous = any_decode_only or any(w.concurrent_sequences for w in workloads)
    # One sequence's KV cache at its longest and on average over its life, in one evaluation.
    tokens = np.empty((2, batch.shape[0]))
    tokens[0], tokens[1] = prompt + output, prompt + (output - 1.0) / 2.0
    full_bytes, mean_bytes = kv_cache_bytes_many(rows, 1.0, tokens)
    schedule = kv_schedule(
        batch,
        asked,
        continuous,
        full_bytes,
        mean_bytes,
        rows.free_bytes,
        limited=check_memory,
        any_continuous=any_continuous,
    )
    mix = pass_mix(
        schedule.batch,
        prompt,
        cached,
        output,
        schedule.running,
        continuous & (decode_worker == 0) if any_decode_only else continuous,
        rows.prefill_budget_tokens,
        rows.data,
        any_continuous=any_continuous,
        all_continuous=not any_decode_only and all(w.concurrent_sequences for w in workloads),
    )
    if any_decode_only:
        mix = decode_worker_mix(mix, schedule.batch, schedule.running, decode_worker > 0)
    terms = workload_terms(rows, mix, prompt, output, schedule.waves)
    arrays = phase_arrays(plans, terms)
    kernel_s, kernel_j = np.add.reduce(arrays.stacked[::4], axis=3)  # time, energy: [2, N]
    overhead_s, sequences_s, wait_s = _host_seconds(rows, mix)
    overhead_s *= schedule.waves
    overhead_j = overhead_gpu_j(
        rows, overhead_s, sequences_s * schedule.waves, wait_s * schedule.waves
    )
    # other pipeline stages idle meanwhile
    phase_j = kernel_j + rows.idle_waiting_w * kernel_s * mix.share + overhead_j * mix.share
    phase_s = kernel_s + overhead_s
    if mix.any_continuous:  # a continuous batch's request waits first (static: no wait)
        _conserve_prefill_j(phase_j, kernel_j, arrays.gpu_j, prompt_to_decode_energy(mix, output))
        prefill_pass_s = phase_s[0] / mix.steps[0]
        phase_s[0] += mix.waiting * _mean_pass_s(phase_s, mix.steps)
        # Arrivals in a wave wait for its prompts ahead; every request, for its host path.
        phase_s[0] += rows.ttft_wave_share * mix.wave_passes * prefill_pass_s
        phase_s[0] += (
            rows.request_overhead_s
            if mix.all_continuous
            else np.where(mix.continuous, rows.request_overhead_s, 0.0)
        )
    return WorkloadEstimates(
        plans=plans,
        sizes=values[:, :3],
        positions=tuple(positions),
        phase_s=phase_s,
        phase_gpu_j=phase_j,
        overhead_s=overhead_s,
        kernel_s=kernel_s,
        kernel_gpu_j=kernel_j,
        arrays=arrays,
        terms=terms,
        kv_cache_bytes=schedule.kv_cache_bytes,
        decode_steps=schedule.waves * mix.steps[1],  # output - 1
        schedule=schedule,
    )


def _conserve_prefill_j(
    phase_j: FloatArray, kernel_j: FloatArray, kernel_gpu_j: FloatArray, ratio: FloatArray
) -> None:
    """Sets (in place) the prefill energy of each continuous request with decode passes to
    `ratio` [N] times its decode energy (service.core.steady_state.prompt_to_decode_energy),
    scaling the prefill kernels' energies (`kernel_gpu_j` [2, N, kernels]) alike; NaN rows
    keep theirs."""
    conserved = ~np.isnan(ratio)
    if not np.count_nonzero(conserved):  # (a direct count costs a fraction of any())
        return
    target = np.where(conserved, ratio, 0.0) * phase_j[1]
    scale = np.where(conserved, target / np.maximum(phase_j[0], 1e-300), 1.0)
    phase_j[0] *= scale
    kernel_j[0] *= scale
    kernel_gpu_j[0] *= scale[:, None]


def _mean_pass_s(phase_s: FloatArray, steps: FloatArray) -> FloatArray:
    """[N] one mean pass of a continuous batch [s]: a decode step (the prefill passes' when
    there is none, one output token). Static rows get a value never used (waiting is 0)."""
    per_step = phase_s / np.maximum(steps, 1.0)
    result: FloatArray = np.where(steps[1] > 0, per_step[1], per_step[0])
    return result


def _host_seconds(rows: ContextRows, mix: PassMix) -> tuple[FloatArray, FloatArray, FloatArray]:
    """[2, N] host-side seconds of each phase of one wave: all of it, its part per running
    sequence, its part feeding workers. A static prefill pays the prefill overhead alone; a
    continuous batch's every pass, the first included, pays a decode step's."""
    steps, running, continuous = mix.steps, mix.running, mix.continuous
    overhead_s, sequences_s, wait_s = decode_host_s(rows, running, steps)  # [2, N] each
    if not mix.any_continuous:  # every prefill static: the wheres below, without them
        overhead_s[0] = rows.prefill_overhead_s
        sequences_s[0] = wait_s[0] = 0.0
        return overhead_s, sequences_s, wait_s
    if mix.all_continuous:  # every prefill continuous: the wheres below would keep them all
        return overhead_s, sequences_s, wait_s
    overhead_s[0] = np.where(continuous, overhead_s[0], rows.prefill_overhead_s)
    sequences_s[0] = np.where(continuous, sequences_s[0], 0.0)
    wait_s[0] = np.where(continuous, wait_s[0], 0.0)
    return overhead_s, sequences_s, wait_s
