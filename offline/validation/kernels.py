"""Kernel validation: the cost model's kernel time (and power) against aiconfigurator's tables.

    python -m offline.validation.kernels --data ../shared/data

writes ``bench/results/kernel_validation.md`` (and ``kernel_validation.png`` where matplotlib is
installed). Validation, not fitting: the coefficients are the service's, unchanged. Tables whose
kind has no mapper in `offline.validation.kernel_ops.MAPPERS` are listed as not priced.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from tqdm import tqdm

from offline.fitting.datasets_common import DEFAULT_DATA_DIR
from offline.validation.kernel_ops import MAPPERS
from offline.validation.kernel_pricing import PricingContext, price_table
from offline.validation.kernel_report import Group, NotPriced, markdown, plot
from offline.validation.kernel_tables import (
    KernelTableFile,
    kernel_table_files,
    read_kernel_table,
    table_row_count,
)
from service.catalog import load_cost_model_coefficients, load_gpu_catalog

REPORT = Path(__file__).resolve().parents[2] / "bench" / "results" / "kernel_validation.md"
DEFAULT_MAX_ROWS = 10_000  # per table, evenly strided: a few minutes on two cores


def _not_priced(data_dir: Path, files: list[KernelTableFile]) -> list[NotPriced]:
    """Every table kind without a mapper, with its GPUs, engines and row count."""
    kinds: dict[str, list[KernelTableFile]] = defaultdict(list)
    for file in files:
        if file.table not in MAPPERS:
            kinds[f"{file.op_folder}/{file.table}"].append(file)
    return [
        NotPriced(
            what=kind,
            reason="no cost-model kernel mapped",
            gpus=tuple(sorted({f.gpu for f in members})),
            engines=tuple(sorted({f.engine for f in members})),
            rows=sum(table_row_count(data_dir, f) for f in members),
        )
        for kind, members in sorted(kinds.items())
    ]


def validate(
    data_dir: Path,
    *,
    gpus: tuple[str, ...] = (),
    tables: tuple[str, ...] = (),
    max_rows: int | None = DEFAULT_MAX_ROWS,
    progress: bool = True,
) -> tuple[dict[tuple[str, str, str], Group], list[NotPriced]]:
    """Price every mapped table's rows; the groups per (op type, GPU, engine) and what is left
    out (whole table kinds, then rows of priced tables by reason)."""
    files = kernel_table_files(data_dir, gpus=gpus, tables=tables)
    gpu_catalog = load_gpu_catalog()
    coefficients = load_cost_model_coefficients()
    groups: dict[tuple[str, str, str], Group] = defaultdict(Group)
    skipped: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    where: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    priced = [f for f in files if f.table in MAPPERS]
    for file in tqdm(priced, desc="kernel tables", unit="table", disable=not progress):
        table = read_kernel_table(data_dir, file, max_rows=max_rows)
        context = PricingContext(gpu_catalog.get(file.gpu_id).spec, coefficients)
        rows = price_table(table, MAPPERS[file.table], context)
        ms, ps, mw, pw = rows.arrays()
        ops = np.array(rows.op)
        for op in sorted(set(rows.op)):
            pick = ops == op
            group = groups[(op, file.gpu, file.engine)]
            group.measured_s.append(ms[pick])
            group.predicted_s.append(ps[pick])
            group.measured_w.append(mw[pick])
            group.predicted_w.append(pw[pick])
            group.versions.add(file.version)
            if np.isfinite(mw[pick]).any():
                group.power_versions.add(file.version)
        for reason, count in rows.skipped.items():
            skipped[(file.table, reason)][file.gpu] += count
            where[(file.table, reason)].add((file.gpu, file.engine))
    left_out = _not_priced(data_dir, files)
    for (table_name, reason), per_gpu in sorted(skipped.items()):
        places = where[(table_name, reason)]
        left_out.append(
            NotPriced(
                what=f"{table_name} rows",
                reason=reason,
                gpus=tuple(sorted({g for g, _ in places})),
                engines=tuple(sorted({e for _, e in places})),
                rows=sum(per_gpu.values()),
            )
        )
    return dict(groups), left_out


def _preamble(data_dir: Path, max_rows: int | None, plotted: bool, version: str) -> list[str]:
    sampling = (
        "every row" if max_rows is None else f"at most {max_rows} rows per table, evenly strided"
    )
    figure = (
        "![predicted vs measured](kernel_validation.png)"
        if plotted
        else "(matplotlib is not installed: no plot)"
    )
    return [
        "# Kernel validation: cost model vs NVIDIA aiconfigurator's measured kernels",
        "",
        f"Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by "
        f"`python -m offline.validation.kernels --data {data_dir}` ({sampling}).",
        f"Coefficients: `{version}` (service/catalog/data/cost_model_coefficients.json), "
        "unchanged: this is validation, not fitting.",
        "Data: `aiconfigurator/kernels/` (NVIDIA aiconfigurator, Apache-2.0), one measured kernel",
        "per row. How rows map onto the cost model's kernels: `offline/validation/kernel_ops.py`.",
        "Median signed error is median(predicted / measured) - 1: negative = predicted too fast.",
        "",
        figure,
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=REPORT, help="markdown report path")
    parser.add_argument("--gpus", nargs="*", default=[], help="GPU folders (default: all)")
    parser.add_argument("--tables", nargs="*", default=[], help="table stems (default: all)")
    parser.add_argument("--max-rows", type=int, default=DEFAULT_MAX_ROWS, help="0: every row")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    max_rows = args.max_rows or None
    groups, left_out = validate(
        args.data,
        gpus=tuple(args.gpus),
        tables=tuple(args.tables),
        max_rows=max_rows,
        progress=not args.no_progress,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plotted = plot(groups, args.out.with_suffix(".png"))
    version = load_cost_model_coefficients().version
    args.out.write_text(
        markdown(groups, left_out, _preamble(args.data, max_rows, plotted, version)),
        encoding="utf-8",
    )
    print(f"wrote {args.out}" + (f" and {args.out.with_suffix('.png').name}" if plotted else ""))


if __name__ == "__main__":
    main()
