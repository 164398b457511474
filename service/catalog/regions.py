"""Grid carbon intensity by region, each figure with its year, basis and public source.

Regions are countries, grid zones (US eGRID subregions) and cloud regions (AWS, GCP, Azure codes).
A cloud region of AWS or Azure carries no figure of its own: it names its grid zone and takes the
intensity of the catalogue entry for that zone (`intensity_from`), so one grid has one figure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from service.catalog.lookup import DATA_DIR, build_index, near_matches, normalise


class UnknownRegion(LookupError):
    """No region of that code; `suggestions` lists near matches."""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown region {name!r}{hint}")
        self.name = name
        self.suggestions = suggestions


@dataclass(frozen=True, slots=True)
class RegionRecord:
    """Annual average location-based grid intensity [gCO2e/kWh] of one region.

    Attributes:
        kind: 'country', 'grid-zone' or 'cloud-region'.
        basis: 'lifecycle' (upstream and construction emissions included) or 'direct'.
        country: ISO 3166 alpha-2 code of the country the region lies in ('WORLD' for the world).
        provider: 'aws', 'gcp' or 'azure' for cloud regions, else None.
        grid_zone: the grid the region draws from, in words.
        intensity_from: code of the entry whose figure this region uses (itself when it has one).
    """

    code: str
    name: str
    kind: str
    year: int
    carbon_intensity_g_per_kwh: float
    basis: str
    source: str
    country: str
    provider: str | None
    grid_zone: str
    intensity_from: str
    aliases: tuple[str, ...] = ()


class RegionCatalog:
    """Read-only region repository, looked up by code or alias (case-insensitive)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.version: str = document["version"]
        self.notes: str = document.get("notes", "")
        sources: Mapping[str, str] = document.get("sources", {})
        entries = {entry["code"]: entry for entry in document["regions"]}
        self._records: dict[str, RegionRecord] = {}
        for code, entry in entries.items():
            if "intensity_from" not in entry:
                self._records[code] = _own_figure(entry, sources)
        for code, entry in entries.items():
            if "intensity_from" in entry:
                self._records[code] = _borrowed_figure(entry, self._records)
        self._records = {code: self._records[code] for code in entries}  # file order
        self._index = build_index((r.code, r.aliases) for r in self._records.values())
        self.default = self._records[document["default_region"]]

    @property
    def records(self) -> list[RegionRecord]:
        return list(self._records.values())

    def get(self, code: str) -> RegionRecord:
        """The region `code` (or an alias such as 'aws:us-east-1'); raises UnknownRegion with
        near matches."""
        found = self._index.get(normalise(code))
        if found is None:
            raise UnknownRegion(code, near_matches(code, self._records))
        return self._records[found]


def _own_figure(entry: Mapping[str, Any], sources: Mapping[str, str]) -> RegionRecord:
    source = sources.get(entry["source"], entry["source"])
    return RegionRecord(
        code=entry["code"],
        name=entry["name"],
        kind=entry.get("kind", "country"),
        year=int(entry["year"]),
        carbon_intensity_g_per_kwh=float(entry["carbon_intensity_g_per_kwh"]),
        basis=entry.get("basis", "lifecycle"),
        source=source,
        country=entry.get("country", entry["code"]),
        provider=entry.get("provider"),
        grid_zone=entry.get("grid_zone", entry["name"]),
        intensity_from=entry["code"],
        aliases=tuple(entry.get("aliases", ())),
    )


def _borrowed_figure(entry: Mapping[str, Any], own: Mapping[str, RegionRecord]) -> RegionRecord:
    target = own.get(entry["intensity_from"])
    if target is None:
        raise ValueError(f"region {entry['code']}: intensity_from {entry['intensity_from']!r}")
    source = (
        f"{entry['name']} draws from {entry['grid_zone']}; figure of catalogue entry "
        f"{target.code} ({target.name}): {target.source}"
    )
    return RegionRecord(
        code=entry["code"],
        name=entry["name"],
        kind=entry.get("kind", "cloud-region"),
        year=target.year,
        carbon_intensity_g_per_kwh=target.carbon_intensity_g_per_kwh,
        basis=target.basis,
        source=source,
        country=entry.get("country", target.country),
        provider=entry.get("provider"),
        grid_zone=entry["grid_zone"],
        intensity_from=target.code,
        aliases=tuple(entry.get("aliases", ())),
    )


@lru_cache(maxsize=4)
def load_region_catalog(path: Path = DATA_DIR / "regions.json") -> RegionCatalog:
    """The region catalogue at `path` (read once per process)."""
    return RegionCatalog(json.loads(path.read_text(encoding="utf-8")))
