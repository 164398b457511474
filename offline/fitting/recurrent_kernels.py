"""The cost model's time for the recurrent-mixer rows of aiconfigurator's kernel tables
(``aiconfigurator/kernels/<gpu>/linear_attention/<engine>/<version>/{mamba2,gdn}_perf.parquet``),
and their accuracy per op, GPU and engine.

A row is one measured kernel (latency in ms) of a Mamba-2 layer (``op_name`` mamba2: the causal
conv1d of prefill and decode) or a gated-DeltaNet layer (``gdn``: the conv1d, the chunked delta
rule in prefill, the recurrent update in decode) at `batch_size` sequences of `seq_len` tokens
(decode: one token each). Its shapes are per GPU (the tables sweep the head counts a
tensor-parallel shard holds), so the kernel is priced on one GPU: a mixer of those shapes in a
one-layer model, bf16, the pass's tokens and sequences, through the same counter and roofline
as a quote (`service.core.kernel_work`, `service.core.roofline`), plus one kernel launch.

`row_work(row, gpu)` gives a general kernel report the row's counts (to price with its own
roofline and power code), `row_time_s` / `row_power_w` the time and power priced here;
``python -m offline.fitting.recurrent_kernels --data ../shared/data`` writes
bench/results/ssm_kernels.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from offline.fitting.datasets_common import DEFAULT_DATA_DIR, MS_PER_S, resolve_data_dir
from offline.fitting.metrics import accuracy
from service.catalog.engines import load_cost_model_coefficients
from service.catalog.gpus import load_gpu_catalog
from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape
from service.core.graph import KernelNode
from service.core.hardware import GpuSpec
from service.core.kernel_work import kernel_work
from service.core.mixers import DeltaNetShape, MambaShape
from service.core.roofline import STREAMING_KINDS, unit_rates, unit_times_s
from service.core.shards import shard_shapes
from service.core.work import Work
from service.core.workload import Deployment, Parallelism, Precision

TABLES = "aiconfigurator/kernels/{gpu}/linear_attention"
GPU_IDS = {
    "h100_sxm": "H100-SXM5-80GB",
    "h200_sxm": "H200-SXM-141GB",
    "a100_sxm": "A100-SXM4-80GB",
    "l40s": "L40S",
}
# kernel_source -> the cost model's kernel kind
KERNEL_KINDS = {
    "causal_conv1d_fn": "causal_conv1d",
    "causal_conv1d_update": "causal_conv1d",
    "chunk_gated_delta_rule": "delta_rule",
    "chunk_gated_delta_rule_flashinfer": "delta_rule",
    "chunk_gated_delta_rule_triton": "delta_rule",
    "fused_recurrent_gated_delta_rule": "delta_rule",
    "fused_recurrent_gated_delta_rule_packed_decode": "delta_rule",
}
REPORT = Path(__file__).resolve().parents[2] / "bench/results/ssm_kernels.md"


def row_architecture(row: Mapping[str, Any]) -> ModelArchitecture:
    """A one-layer model whose only mixer has the row's shapes."""
    hidden = int(row["d_model"])
    mamba, delta = None, None
    if row["op_name"] == "mamba2":
        mamba = MambaShape(
            num_heads=int(row["nheads"]),
            head_dim=int(row["head_dim"]),
            state_size=int(row["d_state"]),
            n_groups=int(row["n_groups"]),
            conv_kernel=int(row["d_conv"]),
            chunk_size=int(row["chunk_size"]),
        )
    else:
        delta = DeltaNetShape(
            num_key_heads=int(row["num_k_heads"]),
            num_value_heads=int(row["num_v_heads"]),
            key_head_dim=int(row["head_k_dim"]),
            value_head_dim=int(row["head_v_dim"]),
            conv_kernel=int(row["d_conv"]),
            state_fp32=True,  # the tables' models (Qwen3.5) state mamba_ssm_dtype float32
        )
    return ModelArchitecture(
        hidden_size=hidden,
        num_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=hidden,
        intermediate_size=hidden,
        vocab_size=1,
        mamba=mamba,
        num_mamba_layers=1 if mamba else 0,
        delta_net=delta,
        num_delta_net_layers=1 if delta else 0,
    )


def row_work(row: Mapping[str, Any], gpu: GpuSpec) -> tuple[str, Work, bool]:
    """(op label, the cost model's counts, whether the kernel streams memory) of the kernel a
    row measured, on one `gpu`, in bf16."""
    arch = row_architecture(row)
    shapes = shard_shapes(arch, Deployment(gpu, Parallelism(), Precision()))
    kind = KERNEL_KINDS[str(row["kernel_source"])]
    operand = "mamba" if row["op_name"] == "mamba2" else "delta_net"
    sequences = float(row["batch_size"])
    tokens = sequences if row["phase"] == "generation" else sequences * float(row["seq_len"])
    p = PassShape(tokens, sequences, sequences, {}, 1)
    work = kernel_work(KernelNode(kind, kind, 1, operand), arch, shapes, p)
    return f"{row['op_name']} {kind} ({row['phase']})", work, kind in STREAMING_KINDS


def _row_seconds(row: Mapping[str, Any], gpu_dir: str) -> tuple[float, float, float]:
    """(time, compute limb, memory limb) [s] of the kernel a row measured."""
    gpu = load_gpu_catalog().get(GPU_IDS[gpu_dir]).spec
    _, work, streaming = row_work(row, gpu)
    coefficients = load_cost_model_coefficients().roofline
    units = unit_times_s(work, unit_rates(gpu, "bf16", coefficients), streaming=streaming)
    # A kernel timed alone pays a launch in either phase (a quote's decode replays CUDA graphs).
    return max(units) + coefficients.kernel_launch_s, max(units[:3]), units[3]


def row_time_s(row: Mapping[str, Any], gpu_dir: str) -> float:
    """The cost model's time [s] of the kernel a table row measured (`gpu_dir`: the tables'
    GPU folder, e.g. ``h100_sxm``)."""
    return _row_seconds(row, gpu_dir)[0]


def row_power_w(row: Mapping[str, Any], gpu_dir: str) -> float:
    """The cost model's mean GPU power [W] over that kernel: idle plus the utilisation-weighted
    share of TDP - idle, capped at TDP (as `service.core.phase` prices every kernel)."""
    time_s, compute_s, memory_s = _row_seconds(row, gpu_dir)
    gpu = load_gpu_catalog().get(GPU_IDS[gpu_dir]).spec
    power = load_cost_model_coefficients().power
    busy_s = power.compute * compute_s + power.memory * memory_s
    return gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * min(busy_s, time_s) / time_s


def table_rows(data_dir: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(gpu folder, engine/version, row) of every linear-attention table row."""
    root = resolve_data_dir(data_dir)
    for gpu_dir in sorted(GPU_IDS):
        folder = root / TABLES.format(gpu=gpu_dir)
        for path in sorted(folder.glob("*/*/*_perf.parquet")):
            engine = f"{path.parent.parent.name} {path.parent.name}"
            for row in pq.read_table(path).to_pylist():
                yield gpu_dir, engine, row


def accuracy_table(data_dir: Path, quantity: str = "latency") -> list[list[str]]:
    """One row per (op, kernel source, phase, GPU, engine) of the rows that measured
    `quantity` (``latency`` or ``power``): count, MAPE, within 10/30 %, median
    predicted/measured."""
    groups: dict[tuple[str, ...], tuple[list[float], list[float]]] = {}
    for gpu_dir, engine, row in table_rows(data_dir):
        if row["kernel_source"] not in KERNEL_KINDS or row.get(quantity) is None:
            continue
        key = (row["op_name"], row["kernel_source"], row["phase"], gpu_dir, engine)
        predicted, measured = groups.setdefault(key, ([], []))
        if quantity == "power":
            predicted.append(row_power_w(row, gpu_dir))
            measured.append(float(row["power"]))
        else:
            predicted.append(row_time_s(row, gpu_dir))
            measured.append(float(row["latency"]) / MS_PER_S)
    return [
        [*key, *accuracy(np.array(p), np.array(m)).as_row()]
        for key, (p, m) in sorted(groups.items())
    ]


def markdown_table(rows: list[list[str]]) -> str:
    header = ["op", "kernel", "phase", "GPU", "engine", "rows", "MAPE %", "<=10 %", "<=30 %"]
    header.append("median pred/meas")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def write_report(data_dir: Path, path: Path = REPORT) -> None:
    """Replace the tables between the report's markers (the prose around them stays)."""
    text = path.read_text(encoding="utf-8")
    for quantity in ("latency", "power"):
        start, end = f"<!-- {quantity} -->", f"<!-- /{quantity} -->"
        head, rest = text.split(start)
        _, tail = rest.split(end)
        table = markdown_table(accuracy_table(data_dir, quantity))
        text = f"{head}{start}\n{table}\n{end}{tail}"
    path.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    write_report(parser.parse_args().data)


if __name__ == "__main__":
    main()
