"""SplitwiseSim ``perf_model.csv``: measured prefill time and per-token decode time.

Units: ``prompt_time``, ``token_time`` and ``e2e_time`` are milliseconds. Checked: Llama-2-70B on
2x A100-80GB decodes a token in 54.9 ms (the bf16 weights, 138 GB, over 2 x 2.04 TB/s take
>= 34 ms, so 62 % of peak bandwidth), and ``e2e_time`` = ``prompt_time`` + (token_size - 1) x
``token_time`` within 1 % on most rows, so all three share the unit and ``token_size`` counts the
first (prefill) token too.

Each configuration was measured 5 times; the batch-1/512/128 point belongs to three sweeps and its
5 rows appear three times verbatim. Verbatim copies are dropped before taking the median of the
distinct repeats (``repeats``); ``source_rows`` counts every CSV row aggregated.

Caveats kept visible rather than filtered (see ``e2e_ratio``): ``h100-80gb-pcap`` rows repeat the
``h100-80gb`` token and e2e times exactly and scale prompt time by ~1.30, so they are derived, not
measured; long-output rows stop early (e2e far below the prediction) but their per-token time is
still a measurement; Llama-2-70B TP2 batch 64 prefill times exceed peak FLOP/s and are unusable.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from offline.fitting.datasets_common import (
    A100_80GB,
    DEFAULT_DATA_DIR,
    H100_80GB,
    MS_PER_S,
    CsvRow,
    read_rows,
)

SPLITWISE_CSV = "splitwise/perf_model.csv"

_MODEL_IDS: dict[str, str] = {
    "llama2-70b": "meta-llama/Llama-2-70b-hf",
    "bloom-176b": "bigscience/bloom",
}
# hardware -> (catalogue id, power capped)
_HARDWARE: dict[str, tuple[str, bool]] = {
    "a100-80gb": (A100_80GB, False),
    "h100-80gb": (H100_80GB, False),
    "h100-80gb-pcap": (H100_80GB, True),
}


@dataclass(frozen=True, slots=True)
class PhaseTimeMeasurement:
    """Median prefill and decode-step time of one Splitwise configuration."""

    model_id: str
    gpu_id: str
    tensor_parallel: int
    batch_size: int  # sequences
    prompt_tokens: int  # per sequence
    output_tokens: int  # per sequence, requested (token_size), including the first token
    prefill_s: float  # whole-batch prefill, s
    decode_step_s: float  # one decode step for the whole batch, s
    e2e_s: float  # measured end-to-end time of the batch, s
    power_capped: bool
    repeats: int  # distinct measurements aggregated
    source_rows: int  # CSV rows aggregated, verbatim duplicates included
    row_refs: tuple[str, ...]

    @property
    def e2e_ratio(self) -> float:
        """Measured e2e over prefill + (output_tokens - 1) x decode step; ~1 when consistent."""
        predicted_s = self.prefill_s + (self.output_tokens - 1) * self.decode_step_s
        return self.e2e_s / predicted_s


_ConfigKey = tuple[str, str, int, int, int, int]


def _config_key(row: CsvRow) -> _ConfigKey:
    return (
        row.text("model"),
        row.text("hardware"),
        row.integer("tensor_parallel"),
        row.integer("batch_size"),
        row.integer("prompt_size"),
        row.integer("token_size"),
    )


def _aggregate(key: _ConfigKey, rows: list[CsvRow]) -> PhaseTimeMeasurement:
    model, hardware, tensor_parallel, batch_size, prompt_tokens, output_tokens = key
    if model not in _MODEL_IDS or hardware not in _HARDWARE:
        raise ValueError(f"{rows[0].ref}: unknown model {model!r} or hardware {hardware!r}")
    gpu_id, power_capped = _HARDWARE[hardware]
    distinct: dict[tuple[str, ...], CsvRow] = {}
    for row in rows:
        distinct.setdefault(tuple(row.values.values()), row)
    repeats = list(distinct.values())

    def median_s(column: str) -> float:
        return statistics.median(row.number(column) for row in repeats) / MS_PER_S

    return PhaseTimeMeasurement(
        model_id=_MODEL_IDS[model],
        gpu_id=gpu_id,
        tensor_parallel=tensor_parallel,
        batch_size=batch_size,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        prefill_s=median_s("prompt_time"),
        decode_step_s=median_s("token_time"),
        e2e_s=median_s("e2e_time"),
        power_capped=power_capped,
        repeats=len(repeats),
        source_rows=len(rows),
        row_refs=tuple(row.ref for row in rows),
    )


def load_splitwise(data_dir: Path = DEFAULT_DATA_DIR) -> list[PhaseTimeMeasurement]:
    """One measurement per configuration, in order of first appearance in the file."""
    groups: dict[_ConfigKey, list[CsvRow]] = {}
    for row in read_rows(data_dir, SPLITWISE_CSV):
        groups.setdefault(_config_key(row), []).append(row)
    return [_aggregate(key, rows) for key, rows in groups.items()]
