"""The rows of the measurement campaigns committed under ``data/campaigns/`` (written by
``python -m offline.measure.campaign``), as the fit uses them.

- Kernel loops with their measured mean power become `KernelPowerRows`: each row's slowest
  compute unit's and memory time at the fitted rates (offline.validation.kernel_ops prices them
  as it prices aiconfigurator's tables) beside its measured time and power. They join the power
  fit (cross_validation.fit_all), so the shared compute, memory and network power fractions
  answer to kernel power measured directly as well as to request energy.
- End-to-end rows become `EndToEndRow`s of engine ``hf-transformers``: static batches of
  random-weight catalogue models in eager PyTorch, one GPU, bf16. fit_all fits that engine's
  host overheads and overhead power on them: the profile `serving.engine: hf-transformers` is
  priced with once a campaign is committed (engine_versions: the campaigns' torch versions).

Which readings are kept. NVML refreshes power and energy only once per update period
(offline.measure.power_trace detects it from each campaign's traces), so a reading over a span
of a few periods is off by up to a whole period's step:

- a kernel's mean power is the time-weighted mean of its sampled trace, where the trace shows
  at least `MIN_TRACE_UPDATES` updates; a loop whose trace shows fewer is dropped. The energy
  counter's mean (the tables' ``power``) is not used: of the two, the trace mean is the one
  that repeats better between two campaigns of one GPU (offline.measure.repeatability). That
  is what decided it, not which of them the fit matches better;
- an end-to-end energy is kept only where the metered span of the request phase lasted at
  least `MIN_ENERGY_PERIODS` update periods (``span_s``, or where a campaign metered each run
  alone, the run's ``time_s``); otherwise the row keeps its times and has no energy. No
  detected period: no energies;
- times (TPOT = decode time / (output - 1), prefill time) are always used.

What is dropped is counted by reason in a `Dropped` the caller passes and reports.
With no campaign committed there are no rows and the fit is what it was.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from offline.fitting.end_to_end import EndToEndRow, estimated_row
from offline.fitting.request_inputs import RequestInputs
from offline.measure.campaign_kernels import SHAPES_MODEL
from offline.measure.campaign_models import ModelCase, case_architecture
from offline.measure.campaign_output import KERNEL_TABLES, Campaign
from offline.measure.plan import HARNESS_ENGINE
from offline.measure.power_trace import (
    campaign_update_period_s,
    time_weighted_mean_w,
    traces_by_item,
    update_times_s,
)
from offline.validation.kernel_ops import MAPPERS
from offline.validation.kernel_pricing import PricingContext
from offline.validation.kernel_tables import KernelTable, KernelTableFile
from service.catalog import GpuCatalog, ModelCatalog, load_model_catalog
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError
from service.core.dtypes import DType
from service.core.roofline import COMPUTE_UNITS, unit_times_s
from service.core.workload import Deployment, Parallelism, Precision, Workload

FloatArray = npt.NDArray[np.float64]
CAMPAIGN_SOURCE = "campaign"
MIN_TRACE_UPDATES = 5
"""Fewest meter updates a kernel loop's power trace must show for its mean to be used."""
MIN_ENERGY_PERIODS = 10.0
"""Fewest meter update periods a metered end-to-end span must last for its energy to be used."""
KERNEL_COLUMNS = ("time_s", "compute_s", "memory_s", "network_s", "measured_w")
"""The measured and priced columns of a kernel row, in `KernelPowerRows` order."""
Dropped = Counter[str]
"""Readings left out, by reason."""


def meter_update_period_s(campaign: Campaign) -> float | None:
    """The campaign's meter update period [s], detected from its power traces; where it has
    none, what its provenance recorded; else None."""
    samples = campaign.tables.get("power_samples")
    detected = campaign_update_period_s(traces_by_item(samples)) if samples else None
    if detected is not None:
        return detected
    recorded = campaign.provenance.get("meter_update_period_s")
    return float(recorded) if recorded else None


def trace_power_w(campaign: Campaign) -> dict[str, tuple[float, int]]:
    """Time-weighted mean power [W] of each kernel loop's trace and the updates it shows."""
    samples = campaign.tables.get("power_samples")
    out = {}
    for item, (t_s, power_w) in (traces_by_item(samples) if samples else {}).items():
        mean = time_weighted_mean_w(t_s, power_w)
        if mean is not None:
            out[item] = (mean, len(update_times_s(t_s, power_w)))
    return out


@dataclass(frozen=True, slots=True)
class KernelPowerRows:
    """Measured kernel loops: time [s], the cost model's compute, memory and link time at the
    fitted rates [s] (summed over a row's kernels), measured mean power [W], the GPU's idle
    power and TDP - idle [W], and per row the GPU and the family of the model whose shapes it
    sweeps (what a grouped validation holds out)."""

    time_s: FloatArray
    compute_s: FloatArray
    memory_s: FloatArray
    network_s: FloatArray
    measured_w: FloatArray
    idle_w: FloatArray
    dynamic_w: FloatArray
    gpu_id: tuple[str, ...] = ()
    family: tuple[str, ...] = ()

    def subset(self, keep: npt.NDArray[np.bool_]) -> KernelPowerRows | None:
        """The rows of `keep`; None when none is left."""
        if not keep.any():
            return None

        def pick(labels: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(v for v, k in zip(labels, keep, strict=True) if k)

        return KernelPowerRows(
            self.time_s[keep],
            self.compute_s[keep],
            self.memory_s[keep],
            self.network_s[keep],
            self.measured_w[keep],
            self.idle_w[keep],
            self.dynamic_w[keep],
            pick(self.gpu_id),
            pick(self.family),
        )

    def predicted_w(self, power: FloatArray) -> FloatArray:
        """Mean power [W] under (compute, memory, network) fractions `power`: the power model
        of service.core.roofline.kernel_gpu_j over the measured time."""
        busy_s = power[0] * self.compute_s + power[1] * self.memory_s + power[2] * self.network_s
        share = np.minimum(busy_s, self.time_s) / self.time_s
        return np.asarray(self.idle_w + self.dynamic_w * share, dtype=np.float64)


def _unit_times(
    table: KernelTable, i: int, context: PricingContext
) -> tuple[float, float, float] | None:
    """(compute, memory, link) time [s] of row i at the context's rates; None when the cost
    model does not price the row."""
    try:
        mapped = MAPPERS[table.file.table](table, i, context)
    except CostModelError:
        return None
    if isinstance(mapped, str):
        return None
    compute = memory = link = 0.0
    for call in mapped[1]:
        rates = context.rates(call.compute_key)
        units = unit_times_s(call.work, rates, streaming=call.streaming)
        compute += max(units[:COMPUTE_UNITS])
        memory += units[3]
        link += call.work.network_bytes / rates.network_bytes_per_s
    return compute, memory, link


def kernel_power_rows(
    campaigns: list[Campaign],
    coefficients: CostModelCoefficients,
    gpus: GpuCatalog,
    dropped: Dropped | None = None,
    models: ModelCatalog | None = None,
) -> KernelPowerRows | None:
    """Every campaign kernel row with a positive measured time and a trace of at least
    `MIN_TRACE_UPDATES` updates, its power the trace's mean; None without any. Rows left out
    are counted in `dropped`."""
    dropped = Counter() if dropped is None else dropped
    models = models or load_model_catalog()
    columns: dict[str, list[float]] = defaultdict(list)
    labels: dict[str, list[str]] = defaultdict(list)
    for campaign in campaigns:
        gpu = gpus.get(str(campaign.provenance["gpu"])).spec
        context = PricingContext(gpu, coefficients)
        traces = trace_power_w(campaign)
        for name in KERNEL_TABLES:
            if name not in campaign.tables:
                continue
            file = KernelTableFile(str(campaign.path), "", "", HARNESS_ENGINE, "", name)
            table = KernelTable(file, campaign.tables[name])
            for i in range(table.rows):
                latency_ms = table.columns["latency"][i]
                power_w, updates = traces.get(str(table.columns["item"][i]), (0.0, 0))
                if not latency_ms > 0.0:  # also drops NaN
                    dropped["kernel: no positive latency"] += 1
                    continue
                if updates < MIN_TRACE_UPDATES:
                    dropped[f"kernel: trace shows < {MIN_TRACE_UPDATES} meter updates"] += 1
                    continue
                units = _unit_times(table, i, context)
                if units is None:
                    dropped["kernel: not priced by the cost model"] += 1
                    continue
                for key, value in zip(
                    KERNEL_COLUMNS, (latency_ms / 1000.0, *units, power_w), strict=True
                ):
                    columns[key].append(float(value))
                columns["idle_w"].append(gpu.idle_w)
                columns["dynamic_w"].append(gpu.tdp_w - gpu.idle_w)
                labels["gpu_id"].append(gpu.id)
                labels["family"].append(models.get(SHAPES_MODEL[name]).family)
    if not columns:
        return None

    def array(name: str) -> FloatArray:
        return np.array(columns[name], dtype=np.float64)

    return KernelPowerRows(
        time_s=array("time_s"),
        compute_s=array("compute_s"),
        memory_s=array("memory_s"),
        network_s=array("network_s"),
        measured_w=array("measured_w"),
        idle_w=array("idle_w"),
        dynamic_w=array("dynamic_w"),
        gpu_id=tuple(labels["gpu_id"]),
        family=tuple(labels["family"]),
    )


def phases_by_item(campaign: Campaign) -> dict[str, dict[str, dict[str, Any]]]:
    """End-to-end rows by item, then by phase."""
    table = campaign.tables.get("end_to_end", {})
    names = list(table)
    rows = [dict(zip(names, values, strict=True)) for values in zip(*table.values(), strict=True)]
    items: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        items[str(row["item"])][str(row["phase"])] = row
    return items


def metered_span_s(row: dict[str, Any]) -> float:
    """How long one energy reading of a phase spanned [s]: ``span_s`` where the campaign ran
    the phase back to back under one reading, else the time of one run (metered alone)."""
    span = row.get("span_s")
    return float(span) if span is not None and span != "" else float(row["time_s"])


def campaign_end_to_end_rows(
    campaigns: list[Campaign],
    models: ModelCatalog,
    gpus: GpuCatalog,
    coefficients: CostModelCoefficients,
    dropped: Dropped | None = None,
) -> list[EndToEndRow]:
    """One `EndToEndRow` per measured static batch: TPOT = decode time / (output - 1) decode
    steps, prefill time, energy per sequence = the whole request's energy / batch size where
    its metered span lasted `MIN_ENERGY_PERIODS` meter periods (else None, counted in
    `dropped`)."""
    dropped = Counter() if dropped is None else dropped
    out = []
    bf16 = Precision(DType.BF16, DType.BF16, DType.BF16)
    for campaign in campaigns:
        gpu = gpus.get(str(campaign.provenance["gpu"])).spec
        period_s = meter_update_period_s(campaign)
        for phases in phases_by_item(campaign).values():
            if set(phases) != {"prefill", "decode", "request"}:
                dropped["end to end: not all three phases measured"] += 1
                continue
            first = phases["request"]
            output = int(first["output_tokens"])
            if output < 2:
                dropped["end to end: no decode step to time"] += 1
                continue
            case = ModelCase(str(first["case"]), str(first["model"]), int(first["layers_delta"]))
            record = models.get(case.model)
            inputs = RequestInputs(
                arch=case_architecture(case, models),
                workload=Workload(int(first["batch_size"]), int(first["prompt_tokens"]), output),
                deployment=Deployment(gpu, Parallelism(tensor=1), bf16),
                engine=HARNESS_ENGINE,
                model_id=record.id,
                family=record.family,
            )
            energy: float | None = float(first["gpu_j"]) / int(first["batch_size"])
            if period_s is None:
                energy = None
                dropped["end to end energy: no meter period detected"] += 1
            elif metered_span_s(first) < MIN_ENERGY_PERIODS * period_s:
                energy = None
                dropped[f"end to end energy: span < {MIN_ENERGY_PERIODS:g} meter periods"] += 1
            measured = (
                float(phases["decode"]["time_s"]) / (output - 1),
                float(phases["prefill"]["time_s"]),
                energy,
            )
            out.append(estimated_row(CAMPAIGN_SOURCE, inputs, coefficients, measured))
    return out


def campaign_versions(campaigns: list[Campaign]) -> list[str]:
    """The torch versions the campaigns ran (the hf-transformers profile's measured versions)."""
    return sorted({str(c.provenance["engine_version"]) for c in campaigns})


def campaign_provenance(
    campaigns: list[Campaign], dropped: Dropped | None = None
) -> dict[str, Any]:
    """What the coefficients file records of the campaigns it was fitted on: each one's
    provenance, row counts and detected meter update period [s], and the readings dropped."""
    keys = ("gpu", "gpu_name", "driver", "torch", "date", "git_commit")
    return {
        "runs": [
            {
                "path": c.path.name,
                **{k: c.provenance[k] for k in keys},
                "meter_update_period_s": meter_update_period_s(c),
                "rows": {t: len(next(iter(cols.values()), [])) for t, cols in c.tables.items()},
            }
            for c in campaigns
        ],
        "dropped": dict(sorted((dropped or Counter()).items())),
    }
