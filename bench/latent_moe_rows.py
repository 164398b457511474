"""The cost model's MoE kernel time on the aiconfigurator `moe_perf` rows at Nemotron 3's
expert shapes (512 experts, top-22): Super's latent (1024 x 2688), Ultra's latent (2048 x 5120)
and Ultra at its full hidden width (8192 x 5120), per GPU and engine.

    python bench/latent_moe_rows.py [--data ../shared/data]

writes bench/results/latent_moe_rows.md. The rows are those `python -m offline.validation.kernels
--tables moe_perf` prices among all others (same mapper, same coefficients); this selects them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from offline.fitting.datasets_common import DEFAULT_DATA_DIR
from offline.validation.kernel_ops import MAPPERS
from offline.validation.kernel_pricing import PricingContext, price_table
from offline.validation.kernel_tables import KernelTable, kernel_table_files, read_kernel_table
from service.catalog import load_cost_model_coefficients, load_gpu_catalog

OUT = Path(__file__).resolve().parent / "results" / "latent_moe_rows.md"
SHAPES = {(1024, 2688): "Super latent", (2048, 5120): "Ultra latent", (8192, 5120): "Ultra full"}


def rows_report(data_dir: Path) -> list[str]:
    gpus, coefficients = load_gpu_catalog(), load_cost_model_coefficients()
    lines = ["| GPU | engine | version | shape | rows | MAPE | median signed | within 30 % |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for file in kernel_table_files(data_dir, tables=("moe_perf",)):
        table = read_kernel_table(data_dir, file)
        col = table.columns
        for (hidden, inter), name in SHAPES.items():
            keep = [
                i for i in range(table.rows)
                if (col["hidden_size"][i], col["inter_size"][i]) == (hidden, inter)
                and col["num_experts"][i] == 512 and col["topk"][i] == 22
            ]  # fmt: skip
            if not keep:
                continue
            subset = KernelTable(file, {k: [v[i] for i in keep] for k, v in col.items()})
            context = PricingContext(gpus.get(file.gpu_id).spec, coefficients)
            measured, predicted, _, _ = price_table(subset, MAPPERS["moe_perf"], context).arrays()
            if not len(measured):
                continue
            err = predicted / measured - 1
            lines.append(
                f"| {file.gpu} | {file.engine} | {file.version} | {name} {hidden}x{inter} | "
                f"{len(err)} | {np.mean(np.abs(err)):.1%} | {np.median(err):+.1%} | "
                f"{np.mean(np.abs(err) < 0.3):.0%} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    args = parser.parse_args()
    head = ["# MoE kernel time at Nemotron 3's expert shapes (aiconfigurator moe_perf rows)", "",
            "Written by `python bench/latent_moe_rows.py`; signed error: predicted / measured - 1.",
            ""]  # fmt: skip
    OUT.write_text("\n".join(head + rows_report(args.data)) + "\n", encoding="utf-8")
    print(OUT)


if __name__ == "__main__":
    main()
