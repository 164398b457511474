"""End-to-end rows (ML.ENERGY, Splitwise) as per-kernel arrays, and the fits that use them.

With kernel efficiencies fixed, a request's time is its kernels' time plus host overheads
(linear in the overheads), and its energy is a sum over kernels of a capped linear function of
the power coefficients. So each row is estimated once with zero overheads, its per-kernel
times kept, and the overheads and power coefficients are fitted on those arrays directly.

A row in a continuous batch (ML.ENERGY: one request joining C running sequences) keeps its
passes' whole kernel arrays and its share of each phase's passes (service.core.steady_state):
every pass, the one computing its prompt included, pays a decode step's host time for the C
running sequences, and the request's energy is its share of each phase's GPU energy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from scipy.optimize import least_squares

from offline.fitting.datasets import EnergyMeasurement, PhaseTimeMeasurement
from offline.fitting.request_inputs import ENGINE_OF_SOURCE, RequestInputs, mlenergy_inputs
from service.catalog import GpuCatalog, ModelCatalog
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError
from service.core.dtypes import DType
from service.core.estimate import estimate_request
from service.core.kernel_table import KernelTable
from service.core.memory import active_parameter_count
from service.core.steady_state import PassMix, pass_mix, prompt_to_decode_energy
from service.core.workload import Deployment, Parallelism, Precision, Workload
from service.pricing.continuous_energy import static_reading

FloatArray = npt.NDArray[np.float64]
Overheads = tuple[float, float, float, float, float]
"""(prefill overhead, decode step overhead, decode overhead per sequence per step, decode kernel
launch, decode overhead per step per GPU worker beyond the first) [s]."""


@dataclass(frozen=True, slots=True)
class PhaseArrays:
    executions: FloatArray
    time_s: FloatArray
    compute_s: FloatArray
    memory_s: FloatArray
    network_s: FloatArray

    @classmethod
    def of(cls, table: KernelTable) -> PhaseArrays:
        columns = (table.executions, table.time_s, table.compute_s, table.memory_s, table.network_s)
        return cls(*(np.asarray(c, dtype=np.float64) for c in columns))


@dataclass(frozen=True, slots=True)
class EndToEndRow:
    """One measured request with its kernel arrays (estimated with zero host overheads)."""

    source: str
    engine: str
    model_id: str
    family: str
    gpu_id: str
    batch_size: int
    decode_steps: int
    gpu_count: int
    group_gpus: int
    idle_w: float
    dynamic_w: float
    prefill: PhaseArrays
    decode: PhaseArrays
    launch_s: float
    measured_tpot_s: float
    measured_prefill_s: float | None
    measured_per_sequence_j: float | None
    fits_memory: bool
    running: float = 0.0  # sequences in each pass (host time per sequence); 0: batch_size
    share: tuple[float, float] = (1.0, 1.0)  # the request's share of each phase's energy
    continuous: bool = False  # in a continuous batch: its prompt's pass is a decode step

    @property
    def sequences(self) -> float:
        """Sequences in every pass [sequences] (static: the batch)."""
        return self.running or float(self.batch_size)


def _row(
    source: str,
    inputs: RequestInputs,
    coeffs: CostModelCoefficients,
    tpot: float,
    prefill: float | None,
    energy: float | None,
) -> EndToEndRow:
    deployment, workload = inputs.deployment, inputs.workload
    gpu, parallelism = deployment.gpu, deployment.parallelism
    estimate = estimate_request(inputs.arch, workload, deployment, coeffs, check_memory=False)
    fits = estimate.memory.required_bytes_per_gpu <= estimate.memory.capacity_bytes_per_gpu
    running = float(workload.concurrent_sequences or 0)
    mix = pass_mix(
        _one(workload.batch_size),
        _one(workload.prompt_tokens),
        _one(workload.cached_prompt_tokens),
        _one(workload.output_tokens),
        _one(running),
        np.array([running > 0]),
        deployment.prefill_budget_tokens,
        parallelism.data,
    )
    return EndToEndRow(
        source=source,
        engine=inputs.engine,
        model_id=inputs.model_id,
        family=inputs.family,
        gpu_id=gpu.id,
        batch_size=workload.batch_size,
        decode_steps=workload.output_tokens - 1,
        gpu_count=parallelism.gpu_count,
        group_gpus=parallelism.gpus_per_stage,
        idle_w=gpu.idle_w,
        dynamic_w=gpu.tdp_w - gpu.idle_w,
        prefill=PhaseArrays.of(estimate.prefill.table),
        decode=PhaseArrays.of(estimate.decode.table),
        launch_s=coeffs.roofline.kernel_launch_s,
        measured_tpot_s=tpot,
        measured_prefill_s=prefill,
        measured_per_sequence_j=energy,
        fits_memory=fits,
        running=running,
        share=_energy_shares(mix, workload.output_tokens),
        continuous=running > 0,
    )


def _energy_shares(mix: PassMix, output_tokens: int) -> tuple[float, float]:
    """The request's share of each phase's energy as the service charges it: a continuous
    request with decode passes pays its prompt as tokens of the mean (decode) pass
    (service.core.steady_state.prompt_to_decode_energy), none of its own prefill passes."""
    ratio = float(prompt_to_decode_energy(mix, _one(output_tokens))[0])
    if np.isnan(ratio):
        return float(mix.share[0, 0]), float(mix.share[1, 0])
    return 0.0, float(mix.share[1, 0]) * (1.0 + ratio)


def _one(value: float) -> FloatArray:
    return np.array([float(value)])


def estimated_row(
    source: str,
    inputs: RequestInputs,
    coeffs: CostModelCoefficients,
    measured: tuple[float, float | None, float | None],
) -> EndToEndRow:
    """One measured request as a row, estimated with `coeffs` without host overheads;
    `measured` is its (TPOT [s], prefill time [s] or None, energy per sequence [J] or None)."""
    return _row(source, inputs, without_overheads(coeffs), *measured)


def without_overheads(coeffs: CostModelCoefficients) -> CostModelCoefficients:
    """`coeffs` with no host overheads (nor time-to-first-token terms) and decode kernels
    launched like prefill ones (the fit adjusts the decode launch cost from each kernel's
    execution count)."""
    roofline = replace(
        coeffs.roofline,
        ttft_wave_share=0.0,
        request_overhead_s=0.0,
        prefill_overhead_s=0.0,
        decode_step_overhead_s=0.0,
        decode_overhead_per_sequence_s=0.0,
        decode_overhead_per_worker_s=0.0,
        decode_kernel_launch_s=coeffs.roofline.kernel_launch_s,
    )
    return replace(coeffs, roofline=roofline)


def end_to_end_rows(
    energy: list[EnergyMeasurement],
    phases: list[PhaseTimeMeasurement],
    models: ModelCatalog,
    gpus: GpuCatalog,
    coeffs: CostModelCoefficients,
    *,
    static: bool = False,
) -> tuple[list[EndToEndRow], list[str]]:
    """Rows that the cost model can represent, and why the others were left out. `static`:
    ML.ENERGY rows in the older reading, a static batch of their running sequences
    (continuous_energy.static_reading), as the serving validation compares."""
    zero = without_overheads(coeffs)
    rows: list[EndToEndRow] = []
    skipped: list[str] = []
    for m in energy:
        inputs = mlenergy_inputs(m, models, gpus)
        if isinstance(inputs, str):
            skipped.append(inputs)
            continue
        if static:
            inputs = replace(inputs, workload=static_reading(inputs.workload))
        try:
            rows.append(
                _row(m.source, inputs, zero, m.time_per_output_token_s, None, m.per_sequence_gpu_j)
            )
        except CostModelError as error:
            skipped.append(f"{m.row_ref}: {error}")
    for p in phases:
        if p.power_capped:
            continue  # derived from the uncapped rows, not measured
        inputs = splitwise_inputs(p, models, gpus)
        if isinstance(inputs, str):
            skipped.append(inputs)
            continue
        try:
            rows.append(_row("splitwise", inputs, zero, p.decode_step_s, p.prefill_s, None))
        except CostModelError as error:
            skipped.append(f"{p.row_refs[0]}: {error}")
    return rows, skipped


def splitwise_inputs(
    p: PhaseTimeMeasurement, models: ModelCatalog, gpus: GpuCatalog
) -> RequestInputs | str:
    """A Splitwise configuration as a static fp16 batch on its own harness's profile, or why
    it cannot be used (a prefill faster than the GPUs' dense peak allows)."""
    if p.prefill_s < _peak_prefill_s(p, models, gpus):
        return f"{p.row_refs[0]}: prefill faster than the GPUs' dense peak allows"
    record = models.get(p.model_id)
    return RequestInputs(
        arch=record.require_architecture(),
        workload=Workload(p.batch_size, p.prompt_tokens, p.output_tokens),
        deployment=Deployment(
            gpus.get(p.gpu_id).spec,
            Parallelism(tensor=p.tensor_parallel),
            Precision(DType.FP16, DType.FP16, DType.FP16),
        ),
        engine=ENGINE_OF_SOURCE["splitwise"],
        model_id=record.id,
        family=record.family,
    )


def step_overhead_s(r: EndToEndRow, overheads: Overheads) -> float:
    """Host time of one decode step of `r` [s]."""
    return overheads[1] + overheads[2] * r.sequences + step_wait_s(r, overheads)


def step_wait_s(r: EndToEndRow, overheads: Overheads) -> float:
    """The part of a decode step's host time in which the driver feeds `r`'s other GPU
    workers and the GPUs wait at idle power [s]."""
    return overheads[4] * (r.gpu_count - 1)


def _peak_prefill_s(p: PhaseTimeMeasurement, models: ModelCatalog, gpus: GpuCatalog) -> float:
    """Prefill time [s] at the GPUs' full dense fp16 peak: no measurement can be faster."""
    arch = models.get(p.model_id).require_architecture()
    active = active_parameter_count(arch) - arch.vocab_size * arch.hidden_size  # no lookup FLOPs
    flops = 2.0 * active * p.batch_size * p.prompt_tokens
    return flops / (gpus.get(p.gpu_id).spec.gemm_peak_flops_per_s("fp16") * p.tensor_parallel)


def decode_kernel_s(r: EndToEndRow, overheads: Overheads) -> FloatArray:
    """Per-kernel decode time [s] with the engine's decode launch cost."""
    return r.decode.time_s + (overheads[3] - r.launch_s) * r.decode.executions


def predicted_tpot_s(rows: list[EndToEndRow], overheads: Overheads) -> FloatArray:
    return np.array(
        [
            decode_kernel_s(r, overheads).sum() / max(r.decode_steps, 1)
            + step_overhead_s(r, overheads)
            for r in rows
        ]
    )


def predicted_prefill_s(rows: list[EndToEndRow], overheads: Overheads) -> FloatArray:
    return np.array([r.prefill.time_s.sum() + _prefill_host_s(r, overheads)[0] for r in rows])


def _prefill_host_s(r: EndToEndRow, overheads: Overheads) -> tuple[float, float, float]:
    """Host time of the pass computing `r`'s prompt [s]: (all of it, its part per running
    sequence, its part feeding workers). Static: the prefill overhead alone; continuous: one
    decode step."""
    if not r.continuous:
        return overheads[0], 0.0, 0.0
    return step_overhead_s(r, overheads), overheads[2] * r.sequences, step_wait_s(r, overheads)


def _phase_energy_j(
    r: EndToEndRow,
    phase: PhaseArrays,
    time_s: FloatArray,
    overhead_s: tuple[float, float, float],
    power: FloatArray,
) -> float:
    """GPU energy of one phase [J]; `overhead_s` is (host time at the engine's overhead power,
    host time at its per-sequence power, host time at idle power)."""
    share = power[0] * phase.compute_s + power[1] * phase.memory_s + power[2] * phase.network_s
    kernel_s = float(time_s.sum())
    active = r.group_gpus * (r.idle_w * kernel_s + r.dynamic_w * np.minimum(share, time_s).sum())
    overhead_w = r.idle_w + r.dynamic_w * power[3]
    sequences_w = r.idle_w + r.dynamic_w * power[4]
    fixed_s, sequences_s, idle_s = overhead_s
    waiting = r.idle_w * (r.gpu_count - r.group_gpus) * kernel_s + r.gpu_count * (
        overhead_w * fixed_s + sequences_w * sequences_s + r.idle_w * idle_s
    )
    return float(active + waiting)


def predicted_per_sequence_j(
    rows: list[EndToEndRow], overheads: Overheads, power: FloatArray
) -> FloatArray:
    """Per-sequence GPU energy [J] of each row for host overheads and power coefficients
    (compute, memory, network, host overhead, host time per sequence)."""
    return np.array([_per_sequence_j(r, overheads, power) for r in rows])


def _per_sequence_j(r: EndToEndRow, overheads: Overheads, power: FloatArray) -> float:
    wait_s = r.decode_steps * step_wait_s(r, overheads)
    sequences_s = r.decode_steps * overheads[2] * r.sequences
    fixed_s = r.decode_steps * step_overhead_s(r, overheads) - wait_s - sequences_s
    host_s, prefill_sequences_s, prefill_wait_s = _prefill_host_s(r, overheads)
    prefill_host = (host_s - prefill_sequences_s - prefill_wait_s, prefill_sequences_s)
    prefill_j = _phase_energy_j(
        r, r.prefill, r.prefill.time_s, (*prefill_host, prefill_wait_s), power
    )
    decode_j = _phase_energy_j(
        r, r.decode, decode_kernel_s(r, overheads), (fixed_s, sequences_s, wait_s), power
    )
    return (r.share[0] * prefill_j + r.share[1] * decode_j) / r.batch_size


def fit_overheads(
    rows: list[EndToEndRow], prefill_overhead_s: float | None = None, *, per_worker: bool = True
) -> Overheads:
    """Host overheads [s] minimising robust log error of TPOT and prefill time.

    Rows without prefill measurements cannot tell the prefill overhead: pass it in
    `prefill_overhead_s` (taken from an engine that has them) and it is held fixed. Without
    `per_worker` the time per worker is held at 0 (an engine with no driver feeding workers).
    """
    timed = [r for r in rows if r.measured_prefill_s is not None]
    tpot = np.array([r.measured_tpot_s for r in rows])
    prefill = np.array([r.measured_prefill_s or 0.0 for r in timed])
    fixed = prefill_overhead_s if not timed else None

    def residuals(overheads: Overheads) -> FloatArray:
        return np.concatenate(
            [
                np.log(predicted_tpot_s(rows, overheads) / tpot),
                np.log(predicted_prefill_s(timed, overheads) / prefill),
            ]
        )

    return fit_overheads_to(residuals, fixed, per_worker=per_worker)


def fit_overheads_to(
    residuals: Callable[[Overheads], FloatArray],
    prefill_overhead_s: float | None,
    *,
    per_worker: bool,
) -> Overheads:
    """Host overheads [s] minimising the robust (soft L1) size of `residuals(overheads)`, log
    errors of measured times. `prefill_overhead_s` holds the prefill overhead fixed (None: it is
    fitted); without `per_worker` the time per worker is held at 0."""
    fixed = prefill_overhead_s

    def full(params: FloatArray) -> Overheads:
        head = [fixed] if fixed is not None else []
        tail = [] if per_worker else [0.0]
        return _overheads(np.concatenate([head, params, tail]))

    start = np.array([1e-3, 1e-3, 1e-6, 2e-6, 1e-4])
    upper = np.array([0.5, 0.05, 1e-3, 2e-5, 0.05])
    scale = np.array([1e-3, 1e-3, 1e-6, 1e-6, 1e-3])
    first = 0 if fixed is None else 1
    last = len(start) if per_worker else len(start) - 1
    fit = least_squares(
        lambda params: residuals(full(params)),
        start[first:last],
        bounds=(np.zeros(last - first), upper[first:last]),
        loss="soft_l1",
        f_scale=0.1,
        x_scale=scale[first:last],
    )
    return full(fit.x)


def _overheads(params: FloatArray) -> Overheads:
    return (
        float(params[0]),
        float(params[1]),
        float(params[2]),
        float(params[3]),
        float(params[4]),
    )


def fit_power(rows: list[EndToEndRow], overheads: Overheads) -> FloatArray:
    """(compute, memory, network, host overhead, host time per sequence) dynamic-power
    fractions (kernel ones in [0, 1.5], host ones in [0, 1]) from per-request energy."""
    measured = [r for r in rows if r.measured_per_sequence_j is not None]
    energy = np.array([r.measured_per_sequence_j for r in measured], dtype=np.float64)
    fit = least_squares(
        lambda p: np.log(predicted_per_sequence_j(measured, overheads, p) / energy),
        np.array([0.6, 0.4, 0.2, 0.2, 0.2]),
        bounds=([0.0] * 5, [1.5, 1.5, 1.5, 1.0, 1.0]),
        loss="soft_l1",
        f_scale=0.1,
    )
    return np.asarray(fit.x, dtype=np.float64)
