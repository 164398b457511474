"""ML.ENERGY leaderboard v2 and v3 rows, each read as one request joining a continuous batch.

Mapping (from ``shared/data/README.md``): a row is a saturated vLLM server's steady state, read as
one request (batch 1) joining ``round(avg batch)`` running sequences
(``serving.concurrent_sequences``), ``round(avg output len)`` output tokens and the task's mean
prompt length (not published per row). Energy per request is the estimate's per-sequence GPU
energy (J, summed over all GPUs of the replica); v2 ``Avg TPOT (s)`` and v3 ``median_itl_ms``
give the time per output token. v3 rows with ``data_parallel > 1`` are skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from offline.fitting.datasets_common import (
    A100_40GB,
    DEFAULT_DATA_DIR,
    H100_80GB,
    MS_PER_S,
    CsvRow,
    read_rows,
)

logger = logging.getLogger(__name__)

MLENERGY_V2_CSV = "mlenergy-v2/mlenergy_v2_llm_configs.csv"
MLENERGY_V3_CSV = "mlenergy-v3-h100/mlenergy_v3_h100_text.csv"

MlEnergySource = Literal["mlenergy-v2", "mlenergy-v3"]
TEXT_CATEGORY = "llm_text_generation"
MULTIMODAL_CATEGORY = "mllm_text_generation"

# Mean prompt tokens per task, as the data README table gives them (as served, chat template
# included): what a caller sends, with no cache hits assumed.
PROMPT_TOKENS_BY_TASK: dict[str, int] = {
    "lm-arena-chat": 690,
    "gpqa": 250,
    "sourcegraph-fim": 1370,
    "chat": 130,
    "code": 130,
}

_GPU_IDS: dict[str, str] = {
    "NVIDIA A100-SXM4-40GB": A100_40GB,
    "NVIDIA H100 80GB HBM3": H100_80GB,
    "H100": H100_80GB,  # v3 names only the family; the leaderboard ran H100 SXM 80 GB HBM3
}
_PRECISIONS: dict[str, str] = {"bfloat16": "bf16", "fp8": "fp8", "mxfp4": "mxfp4"}


@dataclass(frozen=True, slots=True)
class EnergyMeasurement:
    """One ML.ENERGY configuration: one request joining `batch_size` running sequences on one
    model replica."""

    source: MlEnergySource
    category: str  # "llm_text_generation" or "mllm_text_generation" (v2 multimodal models)
    task: str
    model_id: str  # Hugging Face repo id exactly as in the file
    architecture: str | None  # v3 only: "Dense Transformer", "MoE", "Mamba-Transformer Hybrid"
    gpu_id: str
    gpu_count: int  # GPUs of the replica (v2: TP x PP; v3: num_gpus)
    tensor_parallel: int
    expert_parallel: int
    pipeline_parallel: int
    weights_precision: str  # "bf16" | "fp8" | "mxfp4"
    batch_size: int  # round(average running batch), sequences: the concurrent_sequences
    max_batch_size: int  # server cap on running sequences (v2 PP=2: summed over both stages)
    prompt_tokens: int  # task mean, tokens
    output_tokens: int  # round(average output length), tokens
    per_sequence_gpu_j: float  # energy per request, J, all GPUs of the replica
    time_per_output_token_s: float  # v2 average TPOT, v3 median inter-token latency, s
    avg_power_w: float | None  # v3 only: average power, W, summed over all GPUs
    row_ref: str  # "<relative csv path>:<line>"


@dataclass(frozen=True, slots=True)
class MlEnergyData:
    """Loaded rows plus the references of rows skipped, each with its reason."""

    measurements: list[EnergyMeasurement]
    skipped: list[str]


def _gpu_id(raw: str, ref: str) -> str:
    try:
        return _GPU_IDS[raw]
    except KeyError:
        raise ValueError(f"{ref}: unknown GPU {raw!r}") from None


def _prompt_tokens(task: str, ref: str) -> int:
    try:
        return PROMPT_TOKENS_BY_TASK[task]
    except KeyError:
        raise ValueError(f"{ref}: no mean prompt length known for task {task!r}") from None


def _v2_precision(model_id: str) -> str:
    # v2 has no precision column: vLLM served every model in bf16 unless the repo is a quant.
    lowered = model_id.lower()
    for marker in ("awq", "gptq", "int4", "int8"):
        if marker in lowered:
            raise ValueError(f"{model_id}: quantised v2 model, precision unknown")
    return "fp8" if "fp8" in lowered else "bf16"


def _from_v2(row: CsvRow) -> EnergyMeasurement:
    tp, pp = row.integer("TP"), row.integer("PP")
    task = row.text("task")
    return EnergyMeasurement(
        source="mlenergy-v2",
        category=row.text("category"),
        task=task,
        model_id=row.text("Model"),
        architecture=None,
        gpu_id=_gpu_id(row.text("GPU"), row.ref),
        gpu_count=tp * pp,
        tensor_parallel=tp,
        expert_parallel=1,  # vLLM 0.5.4 shards MoE experts with TP, no expert parallelism
        pipeline_parallel=pp,
        weights_precision=_v2_precision(row.text("Model")),
        batch_size=round(row.number("Avg BS (reqs)")),
        max_batch_size=row.integer("Max BS (reqs)"),
        prompt_tokens=_prompt_tokens(task, row.ref),
        output_tokens=round(row.number("Avg Output Tokens")),
        per_sequence_gpu_j=row.number("Energy/req (J)"),
        time_per_output_token_s=row.number("Avg TPOT (s)"),
        avg_power_w=None,
        row_ref=row.ref,
    )


def _from_v3(row: CsvRow) -> EnergyMeasurement:
    task = row.text("task")
    precision = row.text("weight_precision")
    if precision not in _PRECISIONS:
        raise ValueError(f"{row.ref}: unknown weight precision {precision!r}")
    return EnergyMeasurement(
        source="mlenergy-v3",
        category=TEXT_CATEGORY,  # the v3 file holds text tasks only
        task=task,
        model_id=row.text("model_id"),
        architecture=row.text("architecture"),
        gpu_id=_gpu_id(row.text("gpu_model"), row.ref),
        gpu_count=row.integer("num_gpus"),
        tensor_parallel=row.integer("tensor_parallel"),
        expert_parallel=row.integer("expert_parallel"),
        pipeline_parallel=1,
        weights_precision=_PRECISIONS[precision],
        batch_size=round(row.number("avg_batch_size")),
        max_batch_size=row.integer("max_num_seqs"),
        prompt_tokens=_prompt_tokens(task, row.ref),
        output_tokens=round(row.number("avg_output_len")),
        per_sequence_gpu_j=row.number("energy_per_request_joules"),
        time_per_output_token_s=row.number("median_itl_ms") / MS_PER_S,
        avg_power_w=row.number("avg_power_watts"),
        row_ref=row.ref,
    )


def read_mlenergy(data_dir: Path = DEFAULT_DATA_DIR) -> MlEnergyData:
    """v2 then v3 rows in file order, with the refs of skipped rows (data_parallel > 1)."""
    measurements = [_from_v2(row) for row in read_rows(data_dir, MLENERGY_V2_CSV)]
    skipped: list[str] = []
    for row in read_rows(data_dir, MLENERGY_V3_CSV):
        if row.integer("data_parallel") > 1:
            # DP replicas split the load; one estimate models a single replica.
            skipped.append(f"{row.ref} (data_parallel > 1)")
            continue
        measurements.append(_from_v3(row))
    return MlEnergyData(measurements=measurements, skipped=skipped)


def load_mlenergy(data_dir: Path = DEFAULT_DATA_DIR) -> list[EnergyMeasurement]:
    """ML.ENERGY v2 + v3 measurements; logs how many rows were skipped and why."""
    data = read_mlenergy(data_dir)
    if data.skipped:
        logger.info("ML.ENERGY: skipped %d rows: %s", len(data.skipped), ", ".join(data.skipped))
    return data.measurements
