"""GPU servers' non-GPU power and embodied emissions, how embodied emissions are amortised, and
the band of each GPU embodied-carbon method; every figure with its public source."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from service.catalog.figures import RangeRatios, SourcedFigure
from service.catalog.lookup import DATA_DIR
from service.core.facility import ServerProfile


@dataclass(frozen=True, slots=True)
class ServerRecord:
    """One server profile: which GPUs it carries and its non-GPU figures."""

    id: str
    name: str
    gpus: tuple[str, ...]
    gpus_per_server: int
    non_gpu_power_w: SourcedFigure
    non_gpu_embodied_kg_co2e: SourcedFigure

    def profile(self) -> ServerProfile:
        """The core's view: GPUs per server, non-GPU power [W] and embodied [kgCO2e] with bands."""
        return ServerProfile(
            self.gpus_per_server,
            self.non_gpu_power_w.ranged(),
            self.non_gpu_embodied_kg_co2e.ranged(),
        )


class ServerCatalog:
    """Read-only repository of server profiles and amortisation defaults."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.version: str = document["version"]
        self.notes: str = document.get("notes", "")
        self._profiles = {
            p["id"]: ServerRecord(
                id=p["id"],
                name=p["name"],
                gpus=tuple(p["gpus"]),
                gpus_per_server=int(p["gpus_per_server"]),
                non_gpu_power_w=SourcedFigure.from_entry(p["non_gpu_power_w"]),
                non_gpu_embodied_kg_co2e=SourcedFigure.from_entry(p["non_gpu_embodied_kg_co2e"]),
            )
            for p in document["profiles"]
        }
        self._by_gpu: dict[str, str] = {}
        for record in self._profiles.values():
            for gpu in record.gpus:
                if self._by_gpu.setdefault(gpu, record.id) != record.id:
                    raise ValueError(f"GPU {gpu} is in two server profiles")
        self.default = self._profiles[document["default_profile"]]
        amortisation = document["amortisation"]
        self.lifetime_years = SourcedFigure.from_entry(amortisation["lifetime_years"])
        self.utilisation = SourcedFigure.from_entry(amortisation["utilisation"])
        self._gpu_embodied_bands = {
            method: RangeRatios.from_entry(entry)
            for method, entry in document["gpu_embodied_ranges"].items()
        }

    @property
    def records(self) -> list[ServerRecord]:
        return list(self._profiles.values())

    def for_gpu(self, gpu_id: str) -> tuple[ServerRecord, bool]:
        """The profile of servers carrying `gpu_id`, and whether it is the default (not listed)."""
        profile_id = self._by_gpu.get(gpu_id)
        if profile_id is None:
            return self.default, True
        return self._profiles[profile_id], False

    def gpu_embodied_band(self, method: str) -> RangeRatios:
        """Band of GPU embodied figures made by `method` (see gpus.json `embodied_method`)."""
        return self._gpu_embodied_bands[method]

    @property
    def embodied_methods(self) -> list[str]:
        return list(self._gpu_embodied_bands)


@lru_cache(maxsize=4)
def load_server_catalog(path: Path = DATA_DIR / "servers.json") -> ServerCatalog:
    """The server catalogue at `path` (read once per process)."""
    return ServerCatalog(json.loads(path.read_text(encoding="utf-8")))
