"""A GPU from its figures (an estimate's `hardware.spec`, or a GPU registered with POST
/v1/gpus): what the figures leave out is filled from the nearest catalogued GPU, and said so.

"Nearest": among the catalogue's GPUs of the same vendor and architecture (generation), else of
the same vendor, else all, the one whose figures are closest to those given (sum of |ln ratio|
over the figures both have); with no figures to compare, the first of them in catalogue order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from service.catalog.gpus import GpuCatalog, GpuRecord, gpu_spec_from_entry

SPEC_FIELDS: tuple[str, ...] = (
    "tensor_dense_flops_per_s",
    "cuda_core_fp32_flops_per_s",
    "memory_bytes",
    "memory_bandwidth_bytes_per_s",
    "interconnect_bandwidth_bytes_per_s",
    "interconnect_domain_gpus",
    "scale_out_bandwidth_bytes_per_s",
    "tdp_w",
    "idle_w",
    "embodied_kg_co2e",
)
"""The figures a spec may give (the catalogue's field names); the rest of an entry (the
special-function rate, die and process) always comes from the nearest GPU."""
_COMPARED = (
    "memory_bandwidth_bytes_per_s",
    "memory_bytes",
    "tdp_w",
    "cuda_core_fp32_flops_per_s",
)
GIVEN_EMBODIED_METHOD = "given"


@dataclass(frozen=True, slots=True)
class SpecGpu:
    """The GPU a spec describes: its catalogue-shaped record, the GPU its missing figures came
    from, and those figures' names."""

    record: GpuRecord
    filled_from: str
    filled: tuple[str, ...]

    def note(self, where: str) -> str:
        """The warning a quote on this GPU carries (`where`: the request field or 'POST
        /v1/gpus')."""
        if not self.filled:
            return f"{self.record.id} is described by {where}; nothing was filled in"
        return (
            f"{self.record.id} ({where}): {', '.join(self.filled)} not given, taken from "
            f"{self.filled_from}, the nearest catalogued GPU"
        )


def nearest_gpu(
    catalog: GpuCatalog, vendor: str | None, architecture: str | None, given: Mapping[str, Any]
) -> GpuRecord:
    """The catalogued GPU a spec's missing figures are taken from (see the module doc)."""
    records = [r for r in catalog.records if not r.raw.get("registered")]
    pools = [
        [
            r
            for r in records
            if _same(r, "vendor", vendor) and _same(r, "architecture", architecture)
        ],
        [r for r in records if _same(r, "vendor", vendor)],
        records,
    ]
    pool = next(p for p in pools if p)
    return min(pool, key=lambda record: _distance(record, given))


def gpu_from_spec(
    catalog: GpuCatalog, spec: Mapping[str, Any], sources: Mapping[str, str] | None = None
) -> SpecGpu:
    """The record of the GPU `spec` describes (a GpuSpecIn dumped, None for what it leaves
    out), each figure's source: `sources[field]`, or 'given' for a figure without one, or the
    nearest GPU's own for a filled one."""
    given = {k: spec[k] for k in SPEC_FIELDS if spec.get(k) is not None}
    base = nearest_gpu(catalog, spec.get("vendor"), spec.get("architecture"), given)
    entry: dict[str, Any] = {
        key: value
        for key, value in base.raw.items()
        if key not in ("sources", "aliases", "validation")
    }
    filled = tuple(k for k in SPEC_FIELDS if k not in given)
    entry.update(given)
    if "idle_w" not in given and "tdp_w" in given:
        # the nearest GPU's idle share of its TDP, at this TDP
        entry["idle_w"] = base.spec.idle_w * float(given["tdp_w"]) / base.spec.tdp_w
    gpu_id = str(spec.get("id") or "custom-gpu")
    entry.update(
        id=gpu_id,
        name=gpu_id,
        aliases=[],
        vendor=spec.get("vendor") or base.raw.get("vendor", ""),
        architecture=spec.get("architecture") or base.raw.get("architecture", ""),
        filled_from=base.id,
    )
    if "embodied_kg_co2e" in given:
        entry["embodied_method"] = GIVEN_EMBODIED_METHOD
    entry["sources"] = _sources(base, given, filled, sources or {})
    return SpecGpu(GpuRecord(gpu_spec_from_entry(entry), MappingProxyType(entry)), base.id, filled)


def _sources(
    base: GpuRecord, given: Iterable[str], filled: Iterable[str], sources: Mapping[str, str]
) -> dict[str, str]:
    own = {field: sources.get(field, "given with the GPU's description") for field in given}
    taken = {
        key: f"from {base.id}: {text}"
        for key, text in base.sources.items()
        if key.split(".")[0] in filled or key.split(".")[0] not in SPEC_FIELDS
    }
    return {**taken, **own}


def _same(record: GpuRecord, key: str, wanted: str | None) -> bool:
    return wanted is None or str(record.raw.get(key, "")).casefold() == wanted.casefold()


def _distance(record: GpuRecord, given: Mapping[str, Any]) -> float:
    total = 0.0
    for key in _COMPARED:
        if key in given:
            total += abs(math.log(float(given[key]) / float(record.raw[key])))
    peaks = given.get("tensor_dense_flops_per_s") or {}
    for precision, value in peaks.items():
        theirs = record.spec.tensor_dense_flops_per_s.get(precision)
        if theirs:
            total += abs(math.log(float(value) / theirs))
    return total
