"""Grid carbon intensity by region, each figure with its year and public source."""

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
    """Annual average grid intensity [gCO2e/kWh] of one region."""

    code: str
    name: str
    year: int
    carbon_intensity_g_per_kwh: float
    source: str


class RegionCatalog:
    """Read-only region repository, looked up by code (case-insensitive)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.version: str = document["version"]
        self.notes: str = document.get("notes", "")
        self._records = {
            entry["code"]: RegionRecord(
                code=entry["code"],
                name=entry["name"],
                year=int(entry["year"]),
                carbon_intensity_g_per_kwh=float(entry["carbon_intensity_g_per_kwh"]),
                source=entry["source"],
            )
            for entry in document["regions"]
        }
        self._index = build_index((code, []) for code in self._records)
        self.default = self._records[document["default_region"]]

    @property
    def records(self) -> list[RegionRecord]:
        return list(self._records.values())

    def get(self, code: str) -> RegionRecord:
        """The region `code`; raises UnknownRegion with near matches."""
        found = self._index.get(normalise(code))
        if found is None:
            raise UnknownRegion(code, near_matches(code, self._records))
        return self._records[found]


@lru_cache(maxsize=4)
def load_region_catalog(path: Path = DATA_DIR / "regions.json") -> RegionCatalog:
    """The region catalogue at `path` (read once per process)."""
    return RegionCatalog(json.loads(path.read_text(encoding="utf-8")))
