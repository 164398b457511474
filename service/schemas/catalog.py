"""Bodies of the public catalogue endpoints (GPUs, models, regions)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.validation import GpuValidationOut


def open_example(value: dict[str, Any]) -> ConfigDict:
    """Catalogue entries pass every stored figure through (extra keys allowed)."""
    return ConfigDict(extra="allow", json_schema_extra={"examples": [value]})


class GpuOut(BaseModel):
    """A GPU's figures; `sources` gives the public source of each (dotted keys)."""

    model_config = open_example(
        {
            "id": "H100-SXM5-80GB",
            "name": "NVIDIA H100 SXM5 80GB",
            "vendor": "NVIDIA",
            "tensor_dense_flops_per_s": {"bf16": 9.89e14, "fp8": 1.979e15},
            "cuda_core_fp32_flops_per_s": 6.7e13,
            "memory_bytes": 8.0e10,
            "memory_bandwidth_bytes_per_s": 3.35e12,
            "interconnect_bandwidth_bytes_per_s": 4.5e11,
            "tdp_w": 700,
            "idle_w": 80,
            "die_area_mm2": 814,
            "process_node_nm": 4,
            "embodied_kg_co2e": 46.7,
            "sources": {"tdp_w": "NVIDIA H100 datasheet"},
        }
    )

    id: str
    name: str
    tensor_dense_flops_per_s: dict[str, float]
    cuda_core_fp32_flops_per_s: float
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float
    interconnect_bandwidth_bytes_per_s: float
    tdp_w: float
    idle_w: float
    die_area_mm2: float | None = None
    process_node_nm: float | None = None
    embodied_kg_co2e: float
    sources: dict[str, str]
    validation: GpuValidationOut | None = Field(
        default=None,
        description="What measured data this GPU's figures were validated on, and with what "
        "held-out error.",
    )


class GpuList(BaseModel):
    """The catalogue's GPUs, then those added with POST /v1/gpus; `warnings` says when those
    could not be read."""

    model_config = open_example({"version": "2026.11.2", "items": [], "warnings": []})

    version: str
    items: list[GpuOut]
    warnings: list[str] = []


class ModelOut(BaseModel):
    """A catalogue model: its architecture (null when unsupported) and sources."""

    model_config = open_example(
        {
            "id": "meta-llama/Llama-3.1-8B-Instruct",
            "family": "llama",
            "supported": True,
            "unsupported_reason": None,
            "published_precision": "bf16",
            "architecture": {"hidden_size": 4096, "num_layers": 32},
            "notes": [],
            "sources": {"architecture": "config.json"},
        }
    )

    id: str
    family: str
    supported: bool
    unsupported_reason: str | None = None
    published_precision: str | None
    architecture: dict[str, Any] | None
    notes: list[str] = []
    sources: dict[str, str] = {}


class ModelList(BaseModel):
    """The catalogue, then the caller's tenant's registered models; `warnings` says when
    those could not be read."""

    model_config = open_example({"version": "2026.11.2", "items": [], "warnings": []})

    version: str
    items: list[ModelOut]
    warnings: list[str] = []


class RegionOut(BaseModel):
    model_config = open_example(
        {
            "code": "FR",
            "name": "France",
            "year": 2023,
            "carbon_intensity_g_per_kwh": 56.0,
            "source": "Ember, Yearly Electricity Data",
        }
    )

    code: str
    name: str
    year: int
    carbon_intensity_g_per_kwh: float
    source: str


class RegionList(BaseModel):
    model_config = open_example(
        {"version": "2026.11.0", "default_region": "WORLD", "notes": "", "items": []}
    )

    version: str
    default_region: str
    notes: str
    items: list[RegionOut]
