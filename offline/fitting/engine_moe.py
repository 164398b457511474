"""How fast each serving engine runs the routed experts of block-scaled FP8 checkpoints, fitted
on aiconfigurator's per-engine MoE kernel tables.

aiconfigurator (NVIDIA, Apache-2.0) times each engine's fused-MoE kernel
(``kernels/<gpu>/moe/<engine>/<version>/moe_perf.parquet``: ``moe_dtype``, ``num_tokens``,
hidden and intermediate size, top-k, experts, MoE tensor and expert degrees, routing
``distribution``, ``latency`` in ms) for bf16 and block-scaled FP8 (``fp8_block``) weights of
the same shapes. At decode sizes (at most `DECODE_TOKENS` tokens) the kernel streams the touched
experts' weights, so the time ratio fp8_block / bfloat16 of a shape, times bf16's 2 bytes, is
the size the engine's fp8 block-scaled kernel effectively streams each weight element at: the
engine's `block_fp8_expert_bytes`, the median over every shape measured both ways with balanced
routing on the serving runs' GPUs (H100, H200), capped at 2 (no slower than bf16).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from offline.fitting.datasets_common import resolve_data_dir
from offline.fitting.engine_gemm import GEMM_GPUS
from offline.validation.kernel_tables import kernel_table_files

DECODE_TOKENS = 64
BF16_BYTES = 2.0
_SHAPE = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
          "moe_ep_size")  # fmt: skip


def decode_ratios(path: Path) -> list[float]:
    """fp8_block / bfloat16 latency of every decode-sized shape a MoE table measures both ways
    (balanced routing; the fastest of repeated rows)."""
    columns = [*_SHAPE, "moe_dtype", "distribution", "latency"]
    rows = pq.read_table(path, columns=columns).to_pydict()
    fastest: dict[tuple[float, ...], dict[str, float]] = defaultdict(dict)
    for i, latency in enumerate(rows["latency"]):
        dtype = rows["moe_dtype"][i]
        if dtype not in ("bfloat16", "fp8_block") or rows["distribution"][i] != "balanced":
            continue
        if rows["num_tokens"][i] > DECODE_TOKENS or latency <= 0:
            continue
        times = fastest[tuple(float(rows[c][i]) for c in _SHAPE)]
        times[dtype] = min(latency, times.get(dtype, np.inf))
    return [t["fp8_block"] / t["bfloat16"] for t in fastest.values() if len(t) == 2]


def block_fp8_expert_bytes(data_dir: Path, engine: str, without_gpu: str = "") -> float:
    """`engine`'s bytes per block-scaled FP8 expert weight element [B] on its MoE tables of the
    GEMM_GPUS (less the folder `without_gpu`, e.g. "h200_sxm"); 2 when it has none."""
    root = resolve_data_dir(data_dir)
    ratios: list[float] = []
    for f in kernel_table_files(data_dir, gpus=tuple(GEMM_GPUS), tables=("moe_perf",)):
        if f.op_folder == "moe" and f.engine == engine and f.gpu != without_gpu:
            ratios += decode_ratios(root / f.relative)
    if not ratios:
        return BF16_BYTES
    return float(min(BF16_BYTES, BF16_BYTES * np.median(ratios)))
