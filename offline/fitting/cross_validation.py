"""Leave-one-family-out (and leave-one-GPU-out) validation of the whole fitting procedure.

For each held-out group every coefficient is refitted without it — kernel efficiencies on
Vidur, host overheads and power on the end-to-end rows — and the group's rows are predicted.
The collected held-out predictions are what the validation report scores.

Committed campaigns (`campaigns`), when given, train every fold as they train the final fit:
their end-to-end rows (engine hf-transformers) and kernel power rows outside the held-out
group join the overhead and power fits. They are never scored: the held-out figures stay those
of the shared data, so a fit with and without the campaigns can be compared on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import least_squares
from tqdm import tqdm

from offline.fitting.campaign_rows import (
    KernelPowerRows,
    campaign_end_to_end_rows,
    kernel_power_rows,
)
from offline.fitting.datasets import EnergyMeasurement, PhaseTimeMeasurement
from offline.fitting.end_to_end import (
    EndToEndRow,
    Overheads,
    end_to_end_rows,
    fit_overheads,
    fit_power,
    predicted_per_sequence_j,
    predicted_prefill_s,
    predicted_tpot_s,
)
from offline.fitting.kernel_fit import (
    KERNEL_PARAMETERS,
    KernelSamples,
    fit_kernel_efficiencies,
    predict_kernel_s,
)
from offline.fitting.request_inputs import DRIVER_WORKER_ENGINES
from offline.measure.campaign_output import Campaign
from offline.measure.plan import HARNESS_ENGINE
from service.catalog import GpuCatalog, ModelCatalog
from service.catalog.engines import HOST_OVERHEAD_POWER, HOST_PER_SEQUENCE_POWER
from service.core.coefficients import CostModelCoefficients, PowerCoefficients

FloatArray = npt.NDArray[np.float64]


def overhead_values(overheads: Overheads) -> dict[str, float]:
    """Named roofline coefficients of one engine's host-overhead profile."""
    names = (
        "prefill_overhead_s",
        "decode_step_overhead_s",
        "decode_overhead_per_sequence_s",
        "decode_kernel_launch_s",
        "decode_overhead_per_worker_s",
    )
    return dict(zip(names, overheads, strict=True))


def with_roofline_values(
    base: CostModelCoefficients, values: Mapping[str, float]
) -> CostModelCoefficients:
    """`base` with the named roofline coefficients replaced by fitted `values`."""
    fields: dict[str, Any] = dict(values)
    return replace(base, roofline=replace(base.roofline, **fields))


@dataclass(frozen=True, slots=True)
class FittedModel:
    """Every fitted value: kernel efficiencies, host overheads per engine, power.

    `power` holds the shared (compute, memory, network) fractions; `overhead_power` each
    engine's (fixed host time, host time per sequence) fractions: what the GPUs draw during that
    engine's overhead time.
    """

    kernel: dict[str, float]
    network: dict[str, float]
    overheads: dict[str, Overheads]
    power: FloatArray
    overhead_power: dict[str, tuple[float, float]]

    def power_of(self, engine: str) -> FloatArray:
        """(compute, memory, network, host overhead, host time per sequence) power fractions
        under `engine`."""
        return np.append(self.power[:3], self.overhead_power[engine])

    def engine_values(self, engine: str) -> dict[str, float]:
        """`engine`'s entry of a coefficients file: its host overheads and the power its GPUs
        draw during them."""
        fixed, per_sequence = self.overhead_power[engine]
        return {
            **overhead_values(self.overheads[engine]),
            HOST_OVERHEAD_POWER: fixed,
            HOST_PER_SEQUENCE_POWER: per_sequence,
        }

    def power_values(self, engine: str) -> dict[str, float]:
        """A coefficients file's `power` section: the shared kernel power and `engine`'s host
        overhead power, named."""
        names = ("compute", "memory", "network", "host_overhead", "host_per_sequence")
        return dict(zip(names, self.power_of(engine).tolist(), strict=True))

    def coefficients(
        self, base: CostModelCoefficients, engine: str = "vllm-v1"
    ) -> CostModelCoefficients:
        values = {
            **self.kernel,
            **self.network,
            **overhead_values(self.overheads[engine]),
        }
        roofline = with_roofline_values(base, values).roofline
        power = PowerCoefficients(*(float(v) for v in self.power_of(engine)))
        return replace(base, roofline=roofline, power=power)


@dataclass
class HeldOut:
    """Held-out (predicted, measured) pairs per quantity, with their group labels."""

    pairs: dict[str, tuple[list[float], list[float], list[str]]] = field(default_factory=dict)

    def add(
        self, quantity: str, predicted: FloatArray, measured: FloatArray, labels: list[str]
    ) -> None:
        p, m, g = self.pairs.setdefault(quantity, ([], [], []))
        p.extend(predicted.tolist())
        m.extend(measured.tolist())
        g.extend(labels)

    def arrays(self, quantity: str) -> tuple[FloatArray, FloatArray, list[str]]:
        p, m, g = self.pairs.get(quantity, ([], [], []))
        return np.array(p), np.array(m), g


def fit_all(
    samples: KernelSamples,
    network: dict[str, float],
    rows: list[EndToEndRow],
    kernel_power: KernelPowerRows | None = None,
) -> FittedModel:
    """Fit overheads per engine and power on `rows` (already estimated with the kernel fit),
    the power also on a committed campaign's `kernel_power` rows when given."""
    # Engines with prefill measurements first: the others borrow their prefill overhead. The
    # project's own eager-PyTorch harness (a committed campaign) never lends its prefill.
    engines = sorted(
        {r.engine for r in rows},
        key=lambda e: (
            not any(r.measured_prefill_s for r in rows if r.engine == e),
            e == HARNESS_ENGINE,
            e,
        ),
    )
    overheads: dict[str, Overheads] = {}
    for engine in engines:
        borrowed = next(iter(overheads.values()))[0] if overheads else None
        overheads[engine] = fit_overheads(
            [r for r in rows if r.engine == engine],
            borrowed,
            per_worker=engine in DRIVER_WORKER_ENGINES,
        )
    energy_rows = [r for r in rows if r.measured_per_sequence_j is not None]
    power, overhead_power = _fit_power_per_engine(energy_rows, overheads, kernel_power)
    return FittedModel(fit_kernel_efficiencies(samples), network, overheads, power, overhead_power)


def _fit_power_per_engine(
    rows: list[EndToEndRow],
    overheads: dict[str, Overheads],
    kernel_power: KernelPowerRows | None = None,
) -> tuple[FloatArray, dict[str, tuple[float, float]]]:
    """Shared (compute, memory, network) power and each engine's two host-overhead powers.

    Kernel power is physics, shared across engines: one joint fit, each row with its engine's
    overheads. What the GPUs do during an engine's "host overhead" time is not: vLLM 0.5.4 (V0)
    prepares each step on the CPU while the GPUs wait, whereas under vLLM 0.11 (V1: CUDA graphs,
    persistent batch) the per-sequence decode time the roofline misses is GPU work: ML.ENERGY
    v3's own average power reaches 690 W of the H100's 700 W at large batches (Llama-3.1-8B,
    255-691 sequences), where that time is over 40 % of the step (511 sequences: 21.5 of
    48.9 ms). So each engine with energy rows gets its own overhead fractions; an engine
    without (the Splitwise harness) takes their mean. Two per engine: the fixed time per step is
    the CPU scheduling and preparing the step (vLLM V1 blog: at ~5 ms of GPU time per step for
    Llama-8B on H100, that CPU overhead becomes pronounced), the GPUs mostly waiting; the time
    per running sequence is work that grows with the batch (under V1 on the GPU: the v3 rows'
    own power rises with the batch, Llama-3.1-8B from ~490 W at 8 sequences to ~690 W at 192
    and more, which one fraction for both parts cannot follow). A committed campaign's kernel
    loops (`kernel_power`) add one log residual of mean power each, on the shared fractions.
    """
    groups = {engine: [r for r in rows if r.engine == engine] for engine in overheads}
    measured = {e: np.array([r.measured_per_sequence_j for r in g]) for e, g in groups.items() if g}
    engines = list(measured)

    def residuals(p: FloatArray) -> FloatArray:
        kernels = (
            []
            if kernel_power is None
            else [np.log(kernel_power.predicted_w(p[:3]) / kernel_power.measured_w)]
        )
        return np.concatenate(
            [
                np.log(
                    predicted_per_sequence_j(
                        groups[e], overheads[e], np.append(p[:3], p[3 + 2 * i : 5 + 2 * i])
                    )
                    / measured[e]
                )
                for i, e in enumerate(engines)
            ]
            + kernels
        )

    start = fit_power(rows, next(iter(overheads.values())))
    start = np.concatenate([start[:3], np.tile(start[3:5], len(engines))])
    upper = [1.5, 1.5, 1.5] + [1.0] * (2 * len(engines))
    fit = least_squares(
        residuals, start, bounds=([0.0] * len(start), upper), loss="soft_l1", f_scale=0.1
    )
    fitted = {e: (float(fit.x[3 + 2 * i]), float(fit.x[4 + 2 * i])) for i, e in enumerate(engines)}
    fixed, sequences = np.mean(list(fitted.values()), axis=0).tolist()
    overhead_power = {e: fitted.get(e, (fixed, sequences)) for e in overheads}
    return np.asarray(fit.x[:3], dtype=np.float64), overhead_power


def predict_rows(
    held: HeldOut, rows: list[EndToEndRow], model: FittedModel, label: Callable[[EndToEndRow], str]
) -> None:
    """Add each row's predicted TPOT, prefill time and energy to `held`."""
    for engine, overheads in model.overheads.items():
        subset = [r for r in rows if r.engine == engine]
        for source in sorted({r.source for r in subset}):
            rs = [r for r in subset if r.source == source]
            labels = [label(r) for r in rs]
            held.add(
                f"tpot:{source}",
                predicted_tpot_s(rs, overheads),
                np.array([r.measured_tpot_s for r in rs]),
                labels,
            )
            timed = [r for r in rs if r.measured_prefill_s is not None]
            if timed:
                held.add(
                    f"prefill:{source}",
                    predicted_prefill_s(timed, overheads),
                    np.array([r.measured_prefill_s for r in timed]),
                    [label(r) for r in timed],
                )
            energy = [r for r in rs if r.measured_per_sequence_j is not None]
            if energy:
                held.add(
                    f"energy:{source}",
                    predicted_per_sequence_j(energy, overheads, model.power_of(engine)),
                    np.array([r.measured_per_sequence_j for r in energy]),
                    [label(r) for r in energy],
                )


@dataclass(frozen=True)
class Refit:
    """One fold: the model fitted without the held-out rows and samples, the coefficients its
    kernel fit gives (what every row, held-out ones included, is priced with) and those rows."""

    model: FittedModel
    coefficients: CostModelCoefficients
    rows: list[EndToEndRow]


def refit_without(
    group_of_row: Callable[[EndToEndRow], str],
    group: str,
    train_mask: npt.NDArray[np.bool_],
    samples: KernelSamples,
    network: dict[str, float],
    base: CostModelCoefficients,
    data: tuple[list[EnergyMeasurement], list[PhaseTimeMeasurement]],
    models: ModelCatalog,
    gpus: GpuCatalog,
    *,
    static: bool = False,
    campaigns: Sequence[Campaign] = (),
    group_of_kernel: Callable[[str, str], str] | None = None,
) -> Refit | None:
    """Kernel efficiencies on the samples of `train_mask`, every end-to-end row priced with
    them (`static`: ML.ENERGY rows in the older, static reading), host overheads and power on
    the rows outside `group`, with the `campaigns`' rows outside it (kernel rows grouped by
    `group_of_kernel`(GPU id, family)); None when no row is left to fit on. `Refit.rows` are
    the shared data's rows only."""
    kernel = fit_kernel_efficiencies(samples.subset(train_mask))
    coefficients = with_roofline_values(base, {**kernel, **network})
    rows, _ = end_to_end_rows(*data, models, gpus, coefficients, static=static)
    train = [r for r in rows if group_of_row(r) != group]
    if not train:
        return None
    kernel_power = None
    if campaigns:
        own = campaign_end_to_end_rows(list(campaigns), models, gpus, coefficients)
        train += [r for r in own if group_of_row(r) != group]
        measured = kernel_power_rows(list(campaigns), coefficients, gpus, models=models)
        if measured is not None and group_of_kernel is not None:
            labels = zip(measured.gpu_id, measured.family, strict=True)
            measured = measured.subset(np.array([group_of_kernel(*g) != group for g in labels]))
        kernel_power = measured
    fitted = fit_all(samples.subset(train_mask), network, train, kernel_power)
    return Refit(replace(fitted, kernel=kernel), coefficients, rows)


def cross_validate(
    groups: list[str],
    group_of_sample: list[str],
    group_of_row: Callable[[EndToEndRow], str],
    samples: KernelSamples,
    network: dict[str, float],
    base: CostModelCoefficients,
    data: tuple[list[EnergyMeasurement], list[PhaseTimeMeasurement]],
    models: ModelCatalog,
    gpus: GpuCatalog,
    desc: str,
    *,
    campaigns: Sequence[Campaign] = (),
    group_of_kernel: Callable[[str, str], str] | None = None,
) -> HeldOut:
    """Refit without each group in turn (with the `campaigns`' rows outside it, see the
    module doc) and predict that group's rows and kernel samples."""
    held = HeldOut()
    sample_groups = np.array(group_of_sample)
    for group in tqdm(groups, desc=desc, unit="fold"):
        train_mask = sample_groups != group
        refit = refit_without(
            group_of_row,
            group,
            train_mask,
            samples,
            network,
            base,
            data,
            models,
            gpus,
            campaigns=campaigns,
            group_of_kernel=group_of_kernel,
        )
        if refit is None:
            continue
        model, kernel = refit.model, refit.model.kernel
        test = [r for r in refit.rows if group_of_row(r) == group]
        predict_rows(held, test, model, group_of_row)
        test_samples = samples.subset(~train_mask)
        if len(test_samples.measured_s):
            params = np.array([kernel[k] for k in KERNEL_PARAMETERS])
            held.add(
                "kernel:vidur",
                predict_kernel_s(test_samples, params),
                test_samples.measured_s,
                [group] * len(test_samples.measured_s),
            )
    return held
