"""Fit the cost model's efficiencies, overheads and power coefficients, validate them on held-out
model families and GPUs, and write the coefficients file and the validation report.

    python -m offline.fitting.fit_cost_model --data ../shared/data

Writes service/catalog/data/cost_model_coefficients.json (with provenance) and
bench/results/cost_model_validation.md (+ a predicted-vs-measured plot), then fits the
vllm/sglang/trtllm profiles into it (`fit_engine_profiles`, bench/results/engine_profiles.md).
The project's own measurement campaigns committed under data/campaigns/ (none: nothing
changes) join the final fit and every cross-validation fold's training (never its scoring):
kernel power in the power fit, end-to-end rows as the
hf-transformers profile (offline.fitting.campaign_rows).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from offline.fitting.campaign_rows import (
    Dropped,
    campaign_end_to_end_rows,
    campaign_provenance,
    campaign_versions,
    kernel_power_rows,
)
from offline.fitting.cross_validation import (
    FittedModel,
    HeldOut,
    cross_validate,
    fit_all,
    overhead_values,
    with_roofline_values,
)
from offline.fitting.datasets import (
    DEFAULT_DATA_DIR,
    data_source_digests,
    load_mlenergy,
    load_splitwise,
    load_vidur_collectives,
    load_vidur_kernels,
)
from offline.fitting.end_to_end import EndToEndRow, end_to_end_rows
from offline.fitting.fit_engine_profiles import REPORT_PATH as ENGINE_REPORT_PATH
from offline.fitting.fit_engine_profiles import add_engine_profiles, write_engine_report
from offline.fitting.kernel_fit import (
    GEMM_TILE_M,
    fit_collectives,
    fit_kernel_efficiencies,
    kernel_samples,
)
from offline.fitting.metrics import accuracy
from offline.fitting.report import write_report
from offline.measure.campaign_output import committed_campaigns
from offline.measure.plan import HARNESS_ENGINE
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import (
    COEFFICIENTS_PATH,
    DEFAULT_ENGINE,
    ENGINE_DESCRIPTIONS,
    coefficients_from_document,
)

REPORT_PATH = Path("bench/results/cost_model_validation.md")
INTERVAL_QUANTILES = (0.1, 0.9)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR, help="../shared/data")
    parser.add_argument("--out", type=Path, default=COEFFICIENTS_PATH)
    parser.add_argument("--report", type=Path, default=REPORT_PATH)
    parser.add_argument("--version", default="2026.11.7")
    parser.add_argument(
        "--without-campaigns",
        action="store_true",
        help="leave out data/campaigns (to compare the fit with and without them)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    models, gpus = load_model_catalog(), load_gpu_catalog()
    base = coefficients_from_document(json.loads(args.out.read_text(encoding="utf-8")))
    print("loading measurements ...", file=sys.stderr)
    energy, phases = load_mlenergy(args.data), load_splitwise(args.data)
    samples = kernel_samples(load_vidur_kernels(args.data), models, gpus)
    kernel = fit_kernel_efficiencies(samples)
    network, net_pred, net_meas = fit_collectives(
        load_vidur_collectives(args.data), gpus, kernel["kernel_launch_s"]
    )
    coeffs = with_roofline_values(base, {**kernel, **network})
    rows, skipped = end_to_end_rows(energy, phases, models, gpus, coeffs)
    campaigns, dropped = [] if args.without_campaigns else committed_campaigns(), Dropped()
    campaign_rows = campaign_end_to_end_rows(campaigns, models, gpus, coeffs, dropped)
    kernel_power = kernel_power_rows(campaigns, coeffs, gpus, dropped)
    for reason, count in sorted(dropped.items()):
        print(f"campaign readings dropped: {count} x {reason}", file=sys.stderr)
    final = fit_all(samples, network, rows + campaign_rows, kernel_power)

    families = sorted({r.family for r in rows} | set(samples.family))
    by_family = cross_validate(
        families,
        samples.family,
        lambda r: r.family,
        samples,
        network,
        base,
        (energy, phases),
        models,
        gpus,
        "leave-one-family-out",
        campaigns=campaigns,
        group_of_kernel=lambda gpu, family: family,
    )
    gpu_ids = sorted({r.gpu_id.split("-")[0] for r in rows})
    by_gpu = cross_validate(
        gpu_ids,
        [g.split("-")[0] for g in samples.gpu_id],
        lambda r: r.gpu_id.split("-")[0],
        samples,
        network,
        base,
        (energy, phases),
        models,
        gpus,
        "leave-one-GPU-out",
        campaigns=campaigns,
        group_of_kernel=lambda gpu, family: gpu.split("-")[0],
    )
    interval = _energy_interval(by_family)
    document = _coefficients_document(args, final, interval, by_family, rows, skipped)
    document, engine_held = add_engine_profiles(document, args.data)
    if campaigns:
        document["provenance"]["campaigns"] = campaign_provenance(campaigns, dropped)
        if HARNESS_ENGINE in document["engines"]:
            document["engine_versions"][HARNESS_ENGINE] = campaign_versions(campaigns)
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    write_report(args.report, document, by_family, by_gpu, (net_pred, net_meas), skipped)
    write_engine_report(ENGINE_REPORT_PATH, document, engine_held)
    print(f"wrote {args.out} and {args.report}", file=sys.stderr)
    return 0


def _energy_interval(held: HeldOut) -> dict[str, float]:
    """Quantiles of measured / predicted energy on held-out families (all ML.ENERGY sources)."""
    ratios = []
    for quantity in held.pairs:
        if quantity.startswith("energy:"):
            predicted, measured, _ = held.arrays(quantity)
            ratios.extend((measured / predicted).tolist())
    low_q, high_q = INTERVAL_QUANTILES
    return {
        "low_ratio": float(np.quantile(ratios, low_q)),
        "high_ratio": float(np.quantile(ratios, high_q)),
        "lower_quantile": low_q,
        "upper_quantile": high_q,
    }


def _coefficients_document(
    args: argparse.Namespace,
    final: FittedModel,
    interval: dict[str, float],
    held: HeldOut,
    rows: list[EndToEndRow],
    skipped: list[str],
) -> dict[str, Any]:
    metrics = {}
    for quantity in sorted(held.pairs):
        predicted, measured, _ = held.arrays(quantity)
        a = accuracy(predicted, measured)
        metrics[quantity] = {
            "count": a.count,
            "mape_pct": round(a.mape_pct, 2),
            "within_10_pct": round(a.within_10_pct, 1),
            "within_30_pct": round(a.within_30_pct, 1),
        }
    return {
        "catalog": "cost_model_coefficients",
        "version": f"roofline {args.version}",
        "provenance": {
            "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": "python -m offline.fitting.fit_cost_model --data ../shared/data",
            "method": "kernel efficiencies: robust log least squares on Vidur per-kernel times; "
            "network: Vidur intra-node all-reduce; host overheads per engine: ML.ENERGY TPOT and "
            "Splitwise prefill/decode times; power: ML.ENERGY energy per request",
            "data_sha256": data_source_digests(args.data),
            "end_to_end_rows": len(rows),
            "skipped_rows": len(skipped),
            "held_out_family_metrics": metrics,
        },
        "roofline": {
            **final.kernel,
            **final.network,
            **overhead_values(final.overheads[DEFAULT_ENGINE]),
            "gemm_tile_m": GEMM_TILE_M,
        },
        # Serving engines only: the Splitwise harness's profile is fitted, never served. Each
        # engine carries the power its GPUs draw during its host-overhead time.
        "engines": {
            engine: final.engine_values(engine)
            for engine in final.overheads
            if engine in ENGINE_DESCRIPTIONS
        },
        "measurement_harnesses": {
            engine: overhead_values(o)
            for engine, o in final.overheads.items()
            if engine not in ENGINE_DESCRIPTIONS
        },
        # Shared kernel power; host_overhead is the default engine's (as `roofline` holds its
        # overheads).
        "power": final.power_values(DEFAULT_ENGINE),
        "energy_interval": interval,
    }


if __name__ == "__main__":
    raise SystemExit(main())
