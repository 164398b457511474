"""Our cost model and our service against our own campaigns on one GPU.

    python -m offline.validation.campaign_report --gpu H200-SXM-141GB \
        --out bench/results/campaign_h200.md

- Kernels: every kernel row of the campaigns (data/campaigns/) priced as aiconfigurator's
  tables are (offline.validation.kernel_ops, kernel_pricing) with the shipped coefficients:
  time against the measured latency, power against the measured mean power as the fit's
  reader takes it (offline.fitting.campaign_rows: the trace mean, loops with too few meter
  updates left out), by op type.
- End to end: each measured static batch quoted by the shipped estimator as a request of
  engine ``hf-transformers`` (the regressor on, as the service runs; and without it, the cost
  model alone): prefill time, TPOT, total time against the measured ones; GPU energy of the
  batch against the measured request energy where the reader keeps it (a metered span of at
  least `MIN_ENERGY_PERIODS` meter periods). A model cut to fewer layers is quoted as a
  custom architecture of those layers.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from offline.fitting.campaign_rows import (
    MIN_ENERGY_PERIODS,
    MIN_TRACE_UPDATES,
    meter_update_period_s,
    metered_span_s,
    phases_by_item,
    trace_power_w,
)
from offline.fitting.metrics import accuracy
from offline.measure.campaign_models import ModelCase, case_architecture
from offline.measure.campaign_output import KERNEL_TABLES, Campaign, committed_campaigns
from offline.measure.plan import HARNESS_ENGINE
from offline.validation.campaign_plot import plot
from offline.validation.kernel_ops import MAPPERS
from offline.validation.kernel_pricing import PricingContext, price_table
from offline.validation.kernel_report import row_cells
from offline.validation.kernel_tables import KernelTable, KernelTableFile
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engine_versions import choose_profile
from service.catalog.engines import (
    COEFFICIENTS_PATH,
    load_cost_model_coefficients,
    load_engine_versions,
)
from service.catalog.models import ModelCatalog
from service.pricing.estimator import Estimator
from service.pricing.regressor.runtime import (
    DEFAULT_METADATA_PATH,
    DEFAULT_MODEL_PATH,
    EnergyRegressor,
)
from service.schemas.estimate_request import EstimateRequest

HEAD = "| rows | MAPE % | within 10 % | within 30 % | median signed error % |"
CUSTOM_FIELDS = (
    *("hidden_size", "num_layers", "num_attention_heads", "num_key_value_heads", "head_dim"),
    *("intermediate_size", "vocab_size", "max_context_tokens", "mlp", "activation"),
    *("num_experts", "experts_per_token", "moe_intermediate_size", "num_moe_layers"),
)
"""The custom architecture form's fields (schemas.estimate_request.ArchitectureIn)."""
QUANTITIES = ("prefill s", "TPOT s", "total s", "GPU J (service)", "GPU J (cost model)")


@dataclass
class Pairs:
    """Predicted and measured values of one quantity, with where each came from."""

    predicted: list[float] = field(default_factory=list)
    measured: list[float] = field(default_factory=list)

    def add(self, predicted: float, measured: float) -> None:
        self.predicted.append(predicted)
        self.measured.append(measured)

    def cells(self) -> list[str]:
        return row_cells(accuracy(np.array(self.predicted), np.array(self.measured)))


def kernel_pairs(campaigns: list[Campaign]) -> dict[str, tuple[Pairs, Pairs]]:
    """(time, power) pairs by op type over every campaign kernel row the cost model prices;
    power only where the loop's trace shows `MIN_TRACE_UPDATES` meter updates."""
    gpus, coefficients = load_gpu_catalog(), load_cost_model_coefficients()
    out: dict[str, tuple[Pairs, Pairs]] = defaultdict(lambda: (Pairs(), Pairs()))
    for campaign in campaigns:
        context = PricingContext(gpus.get(str(campaign.provenance["gpu"])).spec, coefficients)
        traces = trace_power_w(campaign)
        for name in KERNEL_TABLES:
            if name not in campaign.tables:
                continue
            columns = dict(campaign.tables[name])
            columns["power"] = [
                mean if updates >= MIN_TRACE_UPDATES else float("nan")
                for mean, updates in (traces.get(str(i), (0.0, 0)) for i in columns["item"])
            ]
            file = KernelTableFile(str(campaign.path), "", "", HARNESS_ENGINE, "", name)
            priced = price_table(KernelTable(file, columns), MAPPERS[name], context)
            ms, ps, mw, pw = priced.arrays()
            for k, op in enumerate(priced.op):
                time_pairs, power_pairs = out[op]
                time_pairs.add(float(ps[k]), float(ms[k]))
                if np.isfinite(mw[k]):
                    power_pairs.add(float(pw[k]), float(mw[k]))
    return dict(out)


def quote_request(
    phases: dict[str, dict[str, Any]], gpu: str, models: ModelCatalog
) -> EstimateRequest:
    """The hf-transformers request a measured static batch on `gpu` answers."""
    row = phases["request"]
    case = ModelCase(str(row["case"]), str(row["model"]), int(row["layers_delta"]))
    body: dict[str, Any] = {
        "workload": {
            "batch_size": int(row["batch_size"]),
            "prompt_tokens": int(row["prompt_tokens"]),
            "output_tokens": int(row["output_tokens"]),
        },
        "hardware": {"gpu": gpu, "count": 1},
        "serving": {"engine": HARNESS_ENGINE},
    }
    if case.layers_delta:
        arch = case_architecture(case, models)
        body["architecture"] = {k: getattr(arch, k) for k in CUSTOM_FIELDS}
    else:
        body["model"] = case.model
    return EstimateRequest.model_validate(body)


@dataclass(frozen=True, slots=True)
class Batch:
    """One measured static batch and its two quotes (service, cost model alone)."""

    campaign: str
    case: str
    label: str
    measured: dict[str, float | None]
    quoted: dict[str, float]


def end_to_end(campaigns: list[Campaign]) -> list[Batch]:
    """Every measured static batch of `campaigns` with its quotes."""
    models = load_model_catalog()
    regressor = EnergyRegressor.load(DEFAULT_MODEL_PATH, DEFAULT_METADATA_PATH)
    service, analytical = Estimator.from_catalogues(regressor), Estimator.from_catalogues()
    out = []
    for campaign in campaigns:
        gpu, period = str(campaign.provenance["gpu"]), meter_update_period_s(campaign)
        for phases in phases_by_item(campaign).values():
            if set(phases) != {"prefill", "decode", "request"}:
                continue
            request = quote_request(phases, gpu, models)
            quote = service.estimate(request).document.as_dict()
            plain = analytical.estimate(request).document.as_dict()
            row = phases["request"]
            valid = period is not None and metered_span_s(row) >= MIN_ENERGY_PERIODS * period
            steps = int(row["output_tokens"]) - 1
            measured: dict[str, float | None] = {
                "prefill s": float(phases["prefill"]["time_s"]),
                "TPOT s": float(phases["decode"]["time_s"]) / steps,
                "total s": float(row["time_s"]),
                "GPU J (service)": float(row["gpu_j"]) if valid else None,
                "GPU J (cost model)": float(row["gpu_j"]) if valid else None,
            }
            quoted = {
                "prefill s": quote["latency"]["prefill_s"],
                "TPOT s": quote["latency"]["time_per_output_token_s"],
                "total s": quote["latency"]["total_s"],
                "GPU J (service)": quote["energy"]["gpu_j"],
                "GPU J (cost model)": plain["energy"]["gpu_j"],
            }
            layers = f" ({row['num_layers']} layers)" if int(row["layers_delta"]) else ""
            label = f"{row['case']} {row['model'].split('/')[-1]}{layers} b={row['batch_size']}"
            label += f" p={row['prompt_tokens']}"
            out.append(Batch(campaign.path.name, str(row["case"]), label, measured, quoted))
    return out


def end_to_end_pairs(batches: list[Batch], cases: set[str] | None = None) -> dict[str, Pairs]:
    """Quoted and measured pairs by quantity (of the batches of `cases`, or all)."""
    pairs: dict[str, Pairs] = {q: Pairs() for q in QUANTITIES}
    for batch in batches:
        if cases is not None and batch.case not in cases:
            continue
        for q in QUANTITIES:
            measured = batch.measured[q]
            if measured is not None and measured > 0:
                pairs[q].add(batch.quoted[q], measured)
    return pairs


def _ratio(batch: Batch, q: str) -> str:
    measured = batch.measured[q]
    if measured is None:
        return "-"
    return f"{measured:.3g} / {batch.quoted[q]:.3g}"


def coefficients_note(campaigns: list[Campaign]) -> list[str]:
    """Which coefficients and engine profile priced the quotes, and whether they were fitted
    on these very campaigns (then the end-to-end figures are in-sample)."""
    document = json.loads(COEFFICIENTS_PATH.read_text(encoding="utf-8"))
    fitted_at = document["provenance"]["fitted_at"]
    versions = {str(c.provenance["engine_version"]) for c in campaigns}
    profiles = {choose_profile(HARNESS_ENGINE, v, load_engine_versions()).profile for v in versions}
    fitted_on = {r["path"] for r in document["provenance"].get("campaigns", {}).get("runs", [])}
    ours = fitted_on & {c.path.name for c in campaigns}
    lines = [
        f"Coefficients: the shipped `service/catalog/data/cost_model_coefficients.json` (fitted "
        f"{fitted_at}); the service priced `{HARNESS_ENGINE}` with the "
        + ", ".join(f"`{p}`" for p in sorted(profiles))
        + " profile"
        + (" (a stand-in: no fitted profile of it)." if HARNESS_ENGINE not in profiles else "."),
    ]
    if ours:
        lines.append(
            "That fit used " + ", ".join(sorted(ours)) + ": the figures below are in-sample, "
            "not a validation."
        )
    return lines


def markdown(
    campaigns: list[Campaign], kernels: dict[str, tuple[Pairs, Pairs]], batches: list[Batch]
) -> list[str]:
    lines = [
        "",
        "Campaigns: " + ", ".join(f"`data/campaigns/{c.path.name}`" for c in campaigns) + ".",
        *coefficients_note(campaigns),
        "Signed error: median of predicted / measured - 1. What is measured and how the rows",
        "are read: [docs/measurement.md](../../docs/measurement.md).",
        "",
        "## Kernels: the cost model against our kernel rows",
        "",
        "Time against the measured latency (CUDA-graph loops). Power against the time-weighted",
        f"mean of the sampled trace (loops whose trace shows fewer than {MIN_TRACE_UPDATES}",
        "meter updates left out).",
        "",
        "| op type | time: " + HEAD.removeprefix("| ") + " power: " + HEAD.removeprefix("| "),
        "|---" * 11 + "|",
    ]
    for op in sorted(kernels):
        time_pairs, power_pairs = kernels[op]
        power = power_pairs.cells() if power_pairs.measured else ["0", "-", "-", "-", "-"]
        lines.append("| " + " | ".join([op, *time_pairs.cells(), *power]) + " |")
    pooled_t, pooled_w = Pairs(), Pairs()
    for time_pairs, power_pairs in kernels.values():
        pooled_t.predicted += time_pairs.predicted
        pooled_t.measured += time_pairs.measured
        pooled_w.predicted += power_pairs.predicted
        pooled_w.measured += power_pairs.measured
    lines.append("| **all** | " + " | ".join([*pooled_t.cells(), *pooled_w.cells()]) + " |")
    lines += [
        "",
        "## End to end: the service's hf-transformers quotes against our measurements",
        "",
        "Random-weight models in eager PyTorch, static batches, 64 output tokens, bf16, one GPU.",
        "Energy is the whole batch's GPU energy, compared only where the request's metered span",
        f"lasted at least {MIN_ENERGY_PERIODS:g} meter update periods. `GPU J (service)` is the",
        "quote as the service gives it (learned regressor on); `GPU J (cost model)` without it.",
        "",
        "| quantity | " + HEAD.removeprefix("| "),
        "|---" * 6 + "|",
    ]
    for q, pairs in end_to_end_pairs(batches).items():
        lines.append("| " + " | ".join([q, *pairs.cells()]) + " |")
    lines += [
        "",
        "By case: MAPE % (median signed error %), pairs in brackets where fewer than all:",
        "",
        "| case | " + " | ".join(QUANTITIES) + " |",
        "|---" * (len(QUANTITIES) + 1) + "|",
    ]
    for case in sorted({b.case for b in batches}):
        count = sum(1 for b in batches if b.case == case)
        cells = [f"{case} ({count} batches)"]
        for pairs in end_to_end_pairs(batches, {case}).values():
            n, mape, _, _, signed = pairs.cells()
            cells.append(
                "-" if n == "0" else f"{mape} ({signed})" + ("" if int(n) == count else f" [{n}]")
            )
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Each batch, measured / quoted (energy: `-` where the span was too short):",
        "",
        "| campaign | batch | " + " | ".join(QUANTITIES) + " |",
        "|---" * (len(QUANTITIES) + 2) + "|",
    ]
    for b in batches:
        cells = [b.campaign, b.label, *(_ratio(b, q) for q in QUANTITIES)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offline.validation.campaign_report")
    parser.add_argument("--gpu", default="H200-SXM-141GB", help="the campaigns of this GPU")
    parser.add_argument("--out", type=Path, default=Path("bench/results/campaign_h200.md"))
    args = parser.parse_args(argv)
    campaigns = [c for c in committed_campaigns() if c.provenance["gpu"] == args.gpu]
    if not campaigns:
        parser.error(f"no committed campaign of {args.gpu}")
    kernels, batches = kernel_pairs(campaigns), end_to_end(campaigns)
    command = f"python -m offline.validation.campaign_report --gpu {args.gpu} --out {args.out}"
    lines = [
        f"# Cost model and service against our own {args.gpu} campaigns",
        "",
        f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- command: `{command}` (a few seconds on a CPU)",
        *markdown(campaigns, kernels, batches),
    ]
    png = args.out.with_suffix(".png")
    kinds = {"MoE": {"moe"}, "dense": {b.case for b in batches} - {"moe"}}
    plot(kernels, {k: end_to_end_pairs(batches, cases) for k, cases in kinds.items()}, png)
    lines += ["", f"![predicted against measured]({png.name})"]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
