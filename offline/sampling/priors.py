"""Priors of the configurations worth measuring.

- **Architectures**: catalogue models with a plain decoder architecture the measurement harness
  can build (no MLA, no shared experts, no sliding-window layers), dense or MoE.
- **Prompt and output lengths**: one request of the Azure LLM inference trace 2023 (conversation
  and code, CC-BY-4.0), drawn uniformly, so lengths follow production traffic.
- **Batch sizes**: the running-batch caps vLLM deployments are measured at (ML.ENERGY's
  ``max_num_seqs`` grid), 1 to 128.
- **GPU setups**: the (GPU, count) pairs deployed, tensor parallel over the count; a setup
  whose memory the model does not fit is dropped when the candidate is scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from offline.fitting.datasets import DEFAULT_DATA_DIR, load_azure_trace
from service.catalog.models import ModelCatalog, ModelRecord

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
DEPLOYED_SETUPS: tuple[tuple[str, int], ...] = (
    ("H100-SXM5-80GB", 1),
    ("H100-SXM5-80GB", 2),
    ("H100-SXM5-80GB", 4),
    ("H100-SXM5-80GB", 8),
    ("A100-SXM4-80GB", 1),
    ("A100-SXM4-80GB", 2),
    ("A100-SXM4-80GB", 4),
    ("L4", 1),
)
MAX_TOKENS = 8192  # prompt and output lengths are clipped to this (trace tails)


@dataclass(frozen=True, slots=True)
class Configuration:
    """One configuration to measure: a catalogue model (with `layers_delta` layers added to
    its architecture), a static batch of equal requests, and a GPU setup."""

    model: str
    family: str
    layers_delta: int
    batch_size: int
    prompt_tokens: int
    output_tokens: int
    gpu: str
    gpu_count: int

    def moved(
        self, *, prompt_tokens: int = 0, output_tokens: int = 0, layers: int = 0
    ) -> Configuration:
        """This configuration with prompt, output and layer counts moved by the deltas."""
        return replace(
            self,
            prompt_tokens=self.prompt_tokens + prompt_tokens,
            output_tokens=self.output_tokens + output_tokens,
            layers_delta=self.layers_delta + layers,
        )

    def request(self, models: ModelCatalog) -> dict[str, Any]:
        """The estimate request body (a custom `architecture` when layers are added)."""
        body: dict[str, Any] = {
            "workload": {
                "batch_size": self.batch_size,
                "prompt_tokens": self.prompt_tokens,
                "output_tokens": self.output_tokens,
            },
            "hardware": {"gpu": self.gpu, "count": self.gpu_count},
        }
        if self.layers_delta == 0:
            return {"model": self.model, **body}
        return {
            "architecture": architecture_body(models.get(self.model), self.layers_delta),
            **body,
        }


_ARCHITECTURE_FIELDS = (
    "hidden_size",
    "num_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_context_tokens",
    "mlp",
    "activation",
    "num_experts",
    "experts_per_token",
    "moe_intermediate_size",
    "num_moe_layers",
)


def architecture_body(record: ModelRecord, layers_delta: int) -> dict[str, Any]:
    """The catalogue shapes of `record` as an estimate `architecture`, layers moved."""
    raw = dict(record.raw["architecture"])
    body = {k: raw[k] for k in _ARCHITECTURE_FIELDS if raw.get(k) is not None}
    body["num_layers"] = raw["num_layers"] + layers_delta
    if raw.get("num_moe_layers"):
        body["num_moe_layers"] = raw["num_moe_layers"] + layers_delta
    return body


def buildable(record: ModelRecord) -> bool:
    """Whether the harness can build the architecture from plain modules."""
    arch = record.architecture
    return (
        arch is not None
        and arch.mla is None
        and arch.num_shared_experts == 0
        and arch.sliding_window_tokens is None
        and arch.num_moe_layers in (0, arch.num_layers)
    )


def trace_lengths(data_dir: Path = DEFAULT_DATA_DIR) -> npt.NDArray[np.int64]:
    """(prompt, output) tokens of every request of both Azure traces, shape (n, 2)."""
    pairs = [
        np.stack(load_azure_trace(data_dir, kind), axis=1) for kind in ("conversation", "code")
    ]
    return np.clip(np.concatenate(pairs), 1, MAX_TOKENS)


def draw_candidates(
    models: Sequence[ModelRecord],
    lengths: npt.NDArray[np.int64],
    n: int,
    rng: np.random.Generator,
    setups: Sequence[tuple[str, int]] = DEPLOYED_SETUPS,
) -> list[Configuration]:
    """`n` configurations drawn independently from the priors."""
    drawn = []
    for _ in range(n):
        record = models[int(rng.integers(len(models)))]
        prompt, output = lengths[int(rng.integers(len(lengths)))]
        gpu, count = setups[int(rng.integers(len(setups)))]
        drawn.append(
            Configuration(
                model=record.id,
                family=record.family,
                layers_delta=0,
                batch_size=int(BATCH_SIZES[int(rng.integers(len(BATCH_SIZES)))]),
                prompt_tokens=int(prompt),
                output_tokens=int(output),
                gpu=gpu,
                gpu_count=count,
            )
        )
    return drawn
