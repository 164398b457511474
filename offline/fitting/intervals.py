"""Held-out residuals per evidence level, the split-conformal intervals the service states, and
their nested coverage.

    python -m offline.fitting.intervals --data ../shared/data
        # writes service/catalog/data/intervals.json and bench/results/interval_coverage.md
        # (~8 min: one cost-model refit per model family, GPU and engine held out, and the
        # engine profiles refitted per silicon fold)

Held-out rows (offline/fitting/held_out_rows.py, silicon_levels.py): ML.ENERGY (energy, TPOT)
and Splitwise (a static batch's prefill) with the model family held out and with the GPU held
out, and with each ML.ENERGY engine held out (priced with the other vLLM profile);
aiconfigurator's serving runs priced with their own engine's profile refitted without their
model family, engine version or GPU (TTFT under load, TPOT, total; silicon_levels.py);
Argonne's MI250 runs as the vendor held out (total; argonne_rows.py). Each level's quantiles:
conformal.fit_level on all of its rows, under the rule its inner folds choose; coverage:
conformal.nested_inside.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from offline.fitting.argonne_rows import ARGONNE_CSV, argonne_held_out
from offline.fitting.compound_levels import (
    FewCache,
    choose_compound,
    compound_inside,
    compound_rows,
)
from offline.fitting.conformal import MIN_GROUPS, MIN_ROWS, few_group_rules, fit_level
from offline.fitting.datasets import DEFAULT_DATA_DIR, data_source_digests
from offline.fitting.datasets_common import sha256_file
from offline.fitting.family_folds import FoldData
from offline.fitting.held_out_rows import HeldOutRow, refit_held_out
from offline.fitting.interval_report import coverage_report
from offline.fitting.request_inputs import mlenergy_inputs
from offline.fitting.silicon_levels import silicon_held_out
from offline.fitting.silicon_rows import SILICON_CSV
from service.catalog.engines import load_engine_coefficients
from service.catalog.intervals import INTERVALS_PATH, QUANTITIES
from service.pricing.evidence import LEVELS

QUANTILES = (0.1, 0.9)
REPORT_PATH = Path("bench/results/interval_coverage.md")
COMMAND = "python -m offline.fitting.intervals --data ../shared/data"


def fitted_on(data: FoldData) -> dict[str, frozenset[str]]:
    """What the shipped coefficients were fitted on: GPUs of every fitted source, the engine
    profiles, and the ML.ENERGY rows' weight precisions and model families."""
    inputs = [mlenergy_inputs(m, data.models, data.gpus) for m in data.energy]
    gpus = {m.gpu_id for m in data.energy} | {p.gpu_id for p in data.phases}
    gpus |= set(data.samples.gpu_id)
    return {
        "vendor": frozenset(str(data.gpus.get(g).raw["vendor"]) for g in gpus),
        "gpu": frozenset(gpus),
        "engine": frozenset(load_engine_coefficients()),
        "precision": frozenset(m.weights_precision for m in data.energy),
        "family": frozenset(i.family for i in inputs if not isinstance(i, str)),
    }


def held_out(
    data_dir: Path, cache: Path | None
) -> tuple[list[HeldOutRow], Counter[str], dict[str, frozenset[str]]]:
    """Every held-out row, the silicon runs left out by reason, and the fitted-on sets. The
    ML.ENERGY and Splitwise rows (the slow part: the refits) are read from `cache` when it
    exists, else computed and, with `cache` given, written there."""
    data = FoldData.load(data_dir)
    if cache is not None and cache.exists():
        rows = read_rows(cache)
    else:
        with tqdm(desc="refits", unit="refit", file=sys.stderr) as bar:

            def tick(name: str) -> None:
                bar.set_postfix_str(name)
                bar.update()

            rows = refit_held_out(data, tick)
        if cache is not None:
            write_rows(cache, rows)
    sets = fitted_on(data)
    silicon, skipped = silicon_held_out(data_dir, sets)
    amd, amd_skipped = argonne_held_out(data_dir)
    return rows + silicon + amd, skipped + amd_skipped, sets


def intervals_document(
    rows: list[HeldOutRow], sets: dict[str, frozenset[str]], digests: dict[str, str]
) -> dict[str, Any]:
    """The intervals file (service/catalog/intervals.py reads it)."""
    levels: dict[str, dict[str, Any]] = {}
    few = few_group_rules(rows, *QUANTILES)
    for level in LEVELS:
        levels[level] = {}
        for quantity in QUANTITIES:
            fitted = fit_level(rows, level, quantity, *QUANTILES, few)
            if fitted is None:
                raise ValueError(f"no level in the chain of {level!r} fits {quantity!r}")
            values = dataclasses.asdict(fitted)
            del values["level"]  # the file keys each entry by its level
            values["lower_ratio"] = round(values["lower_ratio"], 4)
            values["upper_ratio"] = round(values["upper_ratio"], 4)
            values["mape_pct"] = round(values["mape_pct"], 1)
            values["score_quantile"] = round(values["score_quantile"], 4)
            levels[level][quantity] = values
    backing: dict[str, dict[str, dict[str, int]]] = {}
    seen = {(r.row_ref, r.gpu, r.engine, r.precision, r.family, r.source) for r in rows}
    for dimension, at in (("gpu", 1), ("engine", 2), ("precision", 3), ("family", 4)):
        counts: dict[str, Counter[str]] = {}
        for case in seen:
            counts.setdefault(case[at], Counter())[case[5]] += 1
        backing[dimension] = {k: dict(sorted(v.items())) for k, v in sorted(counts.items())}
    return {
        "description": "Split-conformal quantiles of ln(measured/predicted) per evidence level "
        "and quantity, each under the rule (score_quantile, mirrored, floored) chosen by leaving "
        "groups out, for a level of one or two groups on the cells with more "
        "(offline/fitting/conformal.py); min rows per level "
        f"{MIN_ROWS}, min groups {MIN_GROUPS}, else the next level of the fallback chain.",
        "lower_quantile": QUANTILES[0],
        "upper_quantile": QUANTILES[1],
        "fitted_on": {k: sorted(v) for k, v in sets.items()},
        "levels": levels,
        "backing": backing,
        "provenance": {
            "command": COMMAND,
            "created_at": f"{datetime.now(UTC):%Y-%m-%dT%H:%MZ}",
            "data_sha256": digests,
        },
    }


def write_rows(path: Path, rows: list[HeldOutRow]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        fields = [f.name for f in dataclasses.fields(HeldOutRow)]
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(dataclasses.asdict(r) for r in rows)


def read_rows(path: Path) -> list[HeldOutRow]:
    """The rows `write_rows` wrote."""
    with path.open(newline="", encoding="utf-8") as handle:
        return [_row(r) for r in csv.DictReader(handle)]


def _row(r: dict[str, str]) -> HeldOutRow:
    measured, predicted = float(r["measured"]), float(r["predicted"])
    case = (r["gpu"], r["engine"], r["precision"], r["family"])
    return HeldOutRow(
        r["level"], r["group"], r["quantity"], r["source"], r["row_ref"], measured, predicted, *case
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR, help="../shared/data")
    parser.add_argument("--out", type=Path, default=INTERVALS_PATH, help="intervals JSON")
    parser.add_argument("--report", type=Path, default=REPORT_PATH, help="coverage report")
    parser.add_argument(
        "--rows", type=Path, default=None, help="also write every held-out row (CSV)"
    )
    parser.add_argument(
        "--refit-rows",
        type=Path,
        default=None,
        help="CSV of the refitted sources' held-out rows: read if it exists, else written "
        "(skips the refits)",
    )
    args = parser.parse_args(argv)
    rows, skipped, sets = held_out(args.data, args.refit_rows)
    digests = data_source_digests(args.data)
    for extra in (SILICON_CSV, ARGONNE_CSV):
        digests[extra] = sha256_file(args.data / extra)
    document = intervals_document(rows, sets, digests)
    few_cache: FewCache = {}
    twice = compound_inside(rows, compound_rows(rows, args.data), "gpu", QUANTILES, few_cache)
    document["compound_rule"] = choose_compound(twice, QUANTILES[1] - QUANTILES[0])
    args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    report = coverage_report(rows, document, skipped, QUANTILES, twice, few_cache)
    args.report.write_text(report, encoding="utf-8")
    if args.rows is not None:
        write_rows(args.rows, rows)
    print(f"wrote {args.out} and {args.report} ({len(rows)} held-out rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
