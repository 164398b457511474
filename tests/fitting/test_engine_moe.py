"""An engine's block-scaled FP8 expert bytes from a MoE kernel table written here by hand.

Two decode-sized shapes measured both ways with balanced routing: bf16 2.0 and 1.0 ms,
fp8_block 1.2 and 0.7 ms (ratios 0.6, 0.7, median 0.65): 2 B x 0.65 = 1.3 B per element. A
prefill-sized shape (128 tokens) and a skewed-routing row, both ratio 1.0, are not read.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offline.fitting.engine_moe import block_fp8_expert_bytes

SHAPE = {"hidden_size": 7168, "inter_size": 2048, "topk": 8, "num_experts": 256,
         "moe_tp_size": 1, "moe_ep_size": 8}  # fmt: skip
ROWS = [  # (num_tokens, dtype, distribution, latency ms)
    (1, "bfloat16", "balanced", 2.0),
    (1, "fp8_block", "balanced", 1.2),
    (16, "bfloat16", "balanced", 1.0),
    (16, "fp8_block", "balanced", 0.7),
    (128, "bfloat16", "balanced", 3.0),
    (128, "fp8_block", "balanced", 3.0),
    (1, "bfloat16", "power_law_1.01", 2.0),
    (1, "fp8_block", "power_law_1.01", 2.0),
]


def _table(data: Path, gpu: str, engine: str) -> None:
    folder = data / "aiconfigurator" / "kernels" / gpu / "moe" / engine / "1.0"
    folder.mkdir(parents=True)
    columns: dict[str, list[object]] = {k: [v] * len(ROWS) for k, v in SHAPE.items()}
    columns["num_tokens"] = [r[0] for r in ROWS]
    columns["moe_dtype"] = [r[1] for r in ROWS]
    columns["distribution"] = [r[2] for r in ROWS]
    columns["latency"] = [r[3] for r in ROWS]
    pq.write_table(pa.table(columns), folder / "moe_perf.parquet")


def test_bytes_are_the_median_decode_ratio_times_bf16s(tmp_path: Path) -> None:
    _table(tmp_path, "h100_sxm", "sglang")
    assert block_fp8_expert_bytes(tmp_path, "sglang") == pytest.approx(1.3)


def test_an_engine_or_gpu_without_tables_keeps_the_16_bit_size(tmp_path: Path) -> None:
    _table(tmp_path, "h100_sxm", "sglang")
    assert block_fp8_expert_bytes(tmp_path, "trtllm") == 2.0
    assert block_fp8_expert_bytes(tmp_path, "sglang", without_gpu="h100_sxm") == 2.0
