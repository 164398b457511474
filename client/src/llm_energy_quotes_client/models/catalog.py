"""Bodies of the public catalogues (GPUs, models, grid regions). Entries carry more figures than
declared here (every stored one, with its source); they are kept as extra members."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from llm_energy_quotes_client.models.base import Document


class Gpu(Document):
    id: str
    name: str
    tensor_dense_flops_per_s: dict[str, float]
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float
    tdp_w: float
    idle_w: float
    embodied_kg_co2e: float
    sources: dict[str, str] = Field(default_factory=dict)


class GpuList(Document):
    version: str
    items: list[Gpu]


class Model(Document):
    """A catalogue model; `architecture` is None when it cannot be priced."""

    id: str
    family: str
    supported: bool
    published_precision: str | None = None
    architecture: dict[str, Any] | None = None


class ModelList(Document):
    version: str
    items: list[Model]


class Region(Document):
    code: str
    name: str
    year: int
    carbon_intensity_g_per_kwh: float
    source: str


class RegionList(Document):
    version: str
    default_region: str
    items: list[Region]
