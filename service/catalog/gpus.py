"""The GPU catalogue: specs with the public source of every figure."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from service.catalog.lookup import DATA_DIR, build_index, near_matches, normalise
from service.core.hardware import GpuSpec


class UnknownGpu(LookupError):
    """No GPU of that name; `suggestions` lists near matches."""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown GPU {name!r}{hint}")
        self.name = name
        self.suggestions = suggestions


@dataclass(frozen=True, slots=True)
class GpuRecord:
    """One catalogue entry: the core's GpuSpec plus the rest of the figures and their sources."""

    spec: GpuSpec
    raw: Mapping[str, Any]

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def embodied_kg_co2e(self) -> float:
        return float(self.raw["embodied_kg_co2e"])

    @property
    def sources(self) -> Mapping[str, str]:
        return MappingProxyType(self.raw["sources"])


def gpu_spec_from_entry(entry: Mapping[str, Any]) -> GpuSpec:
    return GpuSpec(
        id=entry["id"],
        tensor_dense_flops_per_s=MappingProxyType(
            {key: float(v) for key, v in entry["tensor_dense_flops_per_s"].items()}
        ),
        cuda_core_fp32_flops_per_s=float(entry["cuda_core_fp32_flops_per_s"]),
        special_function_ops_per_s=float(entry["special_function_ops_per_s"]),
        memory_bytes=float(entry["memory_bytes"]),
        memory_bandwidth_bytes_per_s=float(entry["memory_bandwidth_bytes_per_s"]),
        interconnect_bandwidth_bytes_per_s=float(entry["interconnect_bandwidth_bytes_per_s"]),
        tdp_w=float(entry["tdp_w"]),
        idle_w=float(entry["idle_w"]),
        interconnect_domain_gpus=int(entry["interconnect_domain_gpus"]),
        scale_out_bandwidth_bytes_per_s=float(entry["scale_out_bandwidth_bytes_per_s"]),
    )


class GpuCatalog:
    """Read-only GPU repository, looked up by id or alias (case-insensitive)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.version: str = document["version"]
        self.notes: str = document.get("notes", "")
        self._records = {
            entry["id"]: GpuRecord(gpu_spec_from_entry(entry), MappingProxyType(dict(entry)))
            for entry in document["gpus"]
        }
        self._index = build_index((e["id"], e.get("aliases", [])) for e in document["gpus"])

    @property
    def ids(self) -> list[str]:
        return list(self._records)

    @property
    def records(self) -> list[GpuRecord]:
        return list(self._records.values())

    def has(self, name: str) -> bool:
        """Whether `name` is an id or alias here."""
        return normalise(name) in self._index

    def with_records(self, records: Iterable[GpuRecord]) -> GpuCatalog:
        """A copy of this catalogue with `records` added (GPUs registered with POST /v1/gpus,
        ids the catalogue does not hold)."""
        extended = copy.copy(self)
        extended._records = {**self._records, **{r.id: r for r in records}}
        extended._index = {**self._index, **{normalise(r.id): r.id for r in records}}
        return extended

    def get(self, name: str) -> GpuRecord:
        """The entry for `name` (id or alias); raises UnknownGpu with near matches."""
        gpu_id = self._index.get(normalise(name))
        if gpu_id is None:
            raise UnknownGpu(name, near_matches(name, self._records))
        return self._records[gpu_id]


@lru_cache(maxsize=4)
def load_gpu_catalog(path: Path = DATA_DIR / "gpus.json") -> GpuCatalog:
    """The GPU catalogue at `path` (read once per process)."""
    return GpuCatalog(json.loads(path.read_text(encoding="utf-8")))
