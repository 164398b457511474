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

With no campaign committed there are no rows and the fit is what it was.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from offline.fitting.end_to_end import EndToEndRow, estimated_row
from offline.fitting.request_inputs import RequestInputs
from offline.measure.campaign_models import ModelCase, case_architecture
from offline.measure.campaign_output import KERNEL_TABLES, Campaign
from offline.measure.plan import HARNESS_ENGINE
from offline.validation.kernel_ops import MAPPERS
from offline.validation.kernel_pricing import PricingContext
from offline.validation.kernel_tables import KernelTable, KernelTableFile
from service.catalog import GpuCatalog, ModelCatalog
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError
from service.core.dtypes import DType
from service.core.roofline import COMPUTE_UNITS, unit_times_s
from service.core.workload import Deployment, Parallelism, Precision, Workload

FloatArray = npt.NDArray[np.float64]
CAMPAIGN_SOURCE = "campaign"


@dataclass(frozen=True, slots=True)
class KernelPowerRows:
    """Measured kernel loops: time [s], the cost model's compute, memory and link time at the
    fitted rates [s] (summed over a row's kernels), measured mean power [W], and the GPU's
    idle power and TDP - idle [W]."""

    time_s: FloatArray
    compute_s: FloatArray
    memory_s: FloatArray
    network_s: FloatArray
    measured_w: FloatArray
    idle_w: FloatArray
    dynamic_w: FloatArray

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
    campaigns: list[Campaign], coefficients: CostModelCoefficients, gpus: GpuCatalog
) -> KernelPowerRows | None:
    """Every campaign kernel row with a positive measured time and power; None without any."""
    columns: dict[str, list[float]] = defaultdict(list)
    for campaign in campaigns:
        gpu = gpus.get(str(campaign.provenance["gpu"])).spec
        context = PricingContext(gpu, coefficients)
        for name in KERNEL_TABLES:
            if name not in campaign.tables:
                continue
            file = KernelTableFile(str(campaign.path), "", "", HARNESS_ENGINE, "", name)
            table = KernelTable(file, campaign.tables[name])
            for i in range(table.rows):
                latency_ms, power_w = table.columns["latency"][i], table.columns["power"][i]
                if not (latency_ms > 0.0 and power_w > 0.0):  # also drops NaN
                    continue
                units = _unit_times(table, i, context)
                if units is None:
                    continue
                for key, value in zip(
                    ("time_s", "compute_s", "memory_s", "network_s", "measured_w"),
                    (latency_ms / 1000.0, *units, power_w),
                    strict=True,
                ):
                    columns[key].append(float(value))
                columns["idle_w"].append(gpu.idle_w)
                columns["dynamic_w"].append(gpu.tdp_w - gpu.idle_w)
    if not columns:
        return None
    return KernelPowerRows(**{k: np.array(v, dtype=np.float64) for k, v in columns.items()})


def _phases(campaign: Campaign) -> dict[str, dict[str, dict[str, Any]]]:
    """End-to-end rows by item, then by phase."""
    table = campaign.tables.get("end_to_end", {})
    names = list(table)
    rows = [dict(zip(names, values, strict=True)) for values in zip(*table.values(), strict=True)]
    items: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        items[str(row["item"])][str(row["phase"])] = row
    return items


def campaign_end_to_end_rows(
    campaigns: list[Campaign],
    models: ModelCatalog,
    gpus: GpuCatalog,
    coefficients: CostModelCoefficients,
) -> list[EndToEndRow]:
    """One `EndToEndRow` per measured static batch: TPOT = decode time / (output - 1) decode
    steps, prefill time, energy per sequence = the whole request's energy / batch size."""
    out = []
    bf16 = Precision(DType.BF16, DType.BF16, DType.BF16)
    for campaign in campaigns:
        gpu = gpus.get(str(campaign.provenance["gpu"])).spec
        for phases in _phases(campaign).values():
            if set(phases) != {"prefill", "decode", "request"}:
                continue
            first = phases["request"]
            output = int(first["output_tokens"])
            if output < 2:
                continue  # no decode step to time
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
            measured = (
                float(phases["decode"]["time_s"]) / (output - 1),
                float(phases["prefill"]["time_s"]),
                float(first["gpu_j"]) / int(first["batch_size"]),
            )
            out.append(estimated_row(CAMPAIGN_SOURCE, inputs, coefficients, measured))
    return out


def campaign_versions(campaigns: list[Campaign]) -> list[str]:
    """The torch versions the campaigns ran (the hf-transformers profile's measured versions)."""
    return sorted({str(c.provenance["engine_version"]) for c in campaigns})


def campaign_provenance(campaigns: list[Campaign]) -> list[dict[str, Any]]:
    """What the coefficients file records of each campaign it was fitted on."""
    keys = ("gpu", "gpu_name", "driver", "torch", "date", "git_commit")
    return [
        {
            "path": c.path.name,
            **{k: c.provenance[k] for k in keys},
            "rows": {t: len(next(iter(cols.values()), [])) for t, cols in c.tables.items()},
        }
        for c in campaigns
    ]
