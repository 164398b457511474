"""Azure LLM inference trace 2023: prompt (context) and generated token counts per request.

Used for workload mixes, not for fitting times: the trace has no latency or energy columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from offline.fitting.datasets_common import DEFAULT_DATA_DIR, read_rows

AzureTraceKind = Literal["code", "conversation"]

AZURE_TRACE_CSVS: dict[AzureTraceKind, str] = {
    "code": "azure-llm-trace-2023/AzureLLMInferenceTrace_code.csv",
    "conversation": "azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv",
}


def load_azure_trace(
    data_dir: Path = DEFAULT_DATA_DIR, kind: AzureTraceKind = "conversation"
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(context_tokens, generated_tokens) per request, in trace order, as int64 arrays."""
    if kind not in AZURE_TRACE_CSVS:
        raise ValueError(
            f"unknown Azure trace kind {kind!r}; expected one of {list(AZURE_TRACE_CSVS)}"
        )
    rows = read_rows(data_dir, AZURE_TRACE_CSVS[kind])
    context_tokens = np.fromiter((row.integer("ContextTokens") for row in rows), dtype=np.int64)
    generated_tokens = np.fromiter((row.integer("GeneratedTokens") for row in rows), dtype=np.int64)
    return context_tokens, generated_tokens
