"""Fitted cost-model coefficients, stored with the provenance of their fit.

Host overheads depend on the serving engine, so the file holds one overhead profile per engine
(``engines``), each with the power its GPUs draw during that overhead time, as fractions of
TDP - idle: ``host_overhead_power`` over the fixed time per step, ``host_per_sequence_power`` over
the time per running sequence; everything else (kernel efficiencies, kernel power) is shared.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from service.catalog.lookup import DATA_DIR
from service.core.architecture import ModelArchitecture
from service.core.coefficients import (
    CostModelCoefficients,
    EnergyInterval,
    PowerCoefficients,
    RooflineCoefficients,
)

COEFFICIENTS_PATH = DATA_DIR / "cost_model_coefficients.json"
HOST_OVERHEAD_POWER = "host_overhead_power"
HOST_PER_SEQUENCE_POWER = "host_per_sequence_power"
_ENGINE_POWER = {HOST_OVERHEAD_POWER: "host_overhead", HOST_PER_SEQUENCE_POWER: "host_per_sequence"}
DEFAULT_ENGINE = "vllm-v1"
ENGINE_DESCRIPTIONS = {
    "vllm-v1": "vLLM >= 0.8 (V1 engine, CUDA graphs, chunked prefill); decode overheads fitted on "
    "ML.ENERGY v3 (vLLM 0.11.1), the prefill overhead on Splitwise's prefill times, "
    "time-to-first-token terms on aiconfigurator's vLLM serving runs",
    "vllm-v0": "vLLM <= 0.6 (V0 engine, host work per running sequence); fitted on ML.ENERGY v2 "
    "(vLLM 0.5.4)",
    "vllm": "vLLM as the aiconfigurator serving runs measured it (0.11.2-0.18); kernel "
    "efficiencies on its GEMM and MoE tables, decode overheads and time-to-first-token terms on "
    "its H100/H200 runs",
    "sglang": "SGLang; kernel efficiencies on aiconfigurator's SGLang GEMM and MoE tables, "
    "decode overheads and time-to-first-token terms on its SGLang H100/H200 serving runs",
    "trtllm": "TensorRT-LLM (PyTorch flow); kernel efficiencies on aiconfigurator's TRT-LLM GEMM "
    "and MoE tables, decode overheads and time-to-first-token terms on its TRT-LLM H100/H200 "
    "serving runs",
    "hf-transformers": "eager PyTorch as Hugging Face transformers runs it (no CUDA graphs, static "
    "batches, layers split over GPUs): what offline.measure measures; fitted on a committed "
    "measurement campaign, else priced with vllm-v0's profile (engine_versions.py)",
}

UNFUSED_UNIT_OFFSET_NORM_ENGINES = frozenset({"vllm-v0"})
"""Engines that run a (1 + weight) RMSNorm (Gemma's, `ModelArchitecture.norm_unit_offset`) as
separate PyTorch ops rather than one kernel. vLLM 0.5.4, whose ML.ENERGY v2 measurements the
vllm-v0 profile is fitted on, had no kernel for it: GemmaRMSNorm.forward_cuda called
forward_native ("TODO(woosuk): Implement an optimized kernel for GemmaRMSNorm") until vLLM PR
#7642 (https://github.com/vllm-project/vllm/pull/7642, "Use torch.compile for GemmaRMSNorm ... a
temporary solution to accelerate Gemma models", opened 2024-08-19, after PR #7139 bumped the
version to v0.5.4 on 2024-08-05) compiled it; vLLM 0.11 (vllm-v1) compiles the whole model. Every
other norm of the catalogue runs as one kernel in both (vLLM's rms_norm / fused_add_rms_norm,
PyTorch's layer_norm)."""


def unfused_norms(arch: ModelArchitecture, engine: str) -> bool:
    """Whether `engine` runs `arch`'s norms as separate ops (`Deployment.unfused_norms`)."""
    return arch.norm_unit_offset and engine in UNFUSED_UNIT_OFFSET_NORM_ENGINES


def coefficients_from_document(document: dict[str, Any]) -> CostModelCoefficients:
    return CostModelCoefficients(
        version=document["version"],
        roofline=RooflineCoefficients(**document["roofline"]),
        power=PowerCoefficients(**document["power"]),
        energy_interval=EnergyInterval(**document["energy_interval"]),
    )


def engine_coefficients_from_document(document: dict[str, Any]) -> dict[str, CostModelCoefficients]:
    """One coefficient set per serving engine (its host overheads over the shared rest)."""
    shared = coefficients_from_document(document)
    engines = document.get("engines") or {DEFAULT_ENGINE: {}}
    out = {}
    for engine, values in engines.items():
        overheads = {k: v for k, v in values.items() if k not in _ENGINE_POWER}
        power = replace(
            shared.power, **{_ENGINE_POWER[k]: v for k, v in values.items() if k in _ENGINE_POWER}
        )
        out[engine] = replace(shared, roofline=replace(shared.roofline, **overheads), power=power)
    return out


@lru_cache(maxsize=4)
def load_engine_coefficients(path: Path = COEFFICIENTS_PATH) -> dict[str, CostModelCoefficients]:
    """Coefficients per serving engine from `path` (read once per process)."""
    return engine_coefficients_from_document(json.loads(path.read_text(encoding="utf-8")))


@lru_cache(maxsize=4)
def load_engine_versions(path: Path = COEFFICIENTS_PATH) -> dict[str, tuple[str, ...]]:
    """The engine versions each profile was fitted on (`engine_versions` of `path`)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    return {p: tuple(v) for p, v in document.get("engine_versions", {}).items()}


def load_cost_model_coefficients(path: Path = COEFFICIENTS_PATH) -> CostModelCoefficients:
    """The coefficients of the default engine (read once per process)."""
    return load_engine_coefficients(path)[DEFAULT_ENGINE]
