"""Data-centre defaults: PUE and on-site WUE by operator, off-site water by country, and the band
of grid-intensity figures by basis; every figure with its public source."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from service.catalog.figures import RangeRatios, SourcedFigure
from service.catalog.lookup import DATA_DIR

DEFAULT_OPERATOR = "default"
WORLD = "WORLD"


class FacilityCatalog:
    """Read-only repository of data-centre defaults."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.version: str = document["version"]
        self.notes: str = document.get("notes", "")
        self._pue = {k: SourcedFigure.from_entry(v) for k, v in document["pue"].items()}
        self._wue = {k: SourcedFigure.from_entry(v) for k, v in document["wue_l_per_kwh"].items()}
        water = document["offsite_water_l_per_kwh"]
        self.offsite_water_band = RangeRatios(
            float(water["low_ratio"]), float(water["high_ratio"]), str(water["source"])
        )
        self._offsite_water = {k: float(v) for k, v in water["by_country"].items()}
        self._intensity_bands = {
            basis: RangeRatios.from_entry(entry)
            for basis, entry in document["carbon_intensity_ranges"].items()
        }

    @property
    def operators(self) -> list[str]:
        return list(self._pue)

    def pue(self, operator: str | None) -> tuple[str, SourcedFigure]:
        """The operator whose fleet PUE [-] applies (`default` when unknown) and that figure."""
        key = operator if operator is not None and operator in self._pue else DEFAULT_OPERATOR
        return key, self._pue[key]

    def wue_l_per_kwh(self, operator: str | None) -> tuple[str, SourcedFigure]:
        """The operator whose on-site WUE [L per IT kWh] applies and that figure."""
        key = operator if operator is not None and operator in self._wue else DEFAULT_OPERATOR
        return key, self._wue[key]

    def offsite_water_l_per_kwh(self, country: str) -> tuple[str, float]:
        """Country (or WORLD when not tabulated) and water consumed per kWh generated [L/kWh]."""
        key = country if country in self._offsite_water else WORLD
        return key, self._offsite_water[key]

    def intensity_band(self, basis: str) -> RangeRatios:
        """Band of grid intensities of `basis` ('lifecycle', 'direct' or 'explicit')."""
        return self._intensity_bands[basis]


@lru_cache(maxsize=4)
def load_facility_catalog(path: Path = DATA_DIR / "facilities.json") -> FacilityCatalog:
    """The facility catalogue at `path` (read once per process)."""
    return FacilityCatalog(json.loads(path.read_text(encoding="utf-8")))
