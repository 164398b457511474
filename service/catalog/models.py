"""The model catalogue: decoder architectures keyed by Hugging Face repo id, with sources."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from service.catalog.lookup import DATA_DIR, build_index, near_matches, normalise
from service.catalog.variants import Variant, VariantIndex
from service.core.architecture import AttentionShape, DsaShape, MlaShape, ModelArchitecture
from service.core.cost_model_errors import UnsupportedArchitecture
from service.core.dtypes import DType, parse_dtype
from service.core.mixers import DeltaNetShape, MambaShape


class UnknownModel(LookupError):
    """No model of that id; `suggestions` lists near matches."""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown model {name!r}{hint}")
        self.name = name
        self.suggestions = suggestions


@dataclass(frozen=True, slots=True)
class ModelRecord:
    """One catalogue entry: its architecture (None when unsupported) and metadata."""

    id: str
    family: str
    published_precision: DType
    architecture: ModelArchitecture | None
    raw: Mapping[str, Any]

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self.raw.get("notes", []))

    def require_architecture(self) -> ModelArchitecture:
        """The architecture, or UnsupportedArchitecture saying why there is none."""
        if self.architecture is None:
            reason = self.raw.get("unsupported_reason") or "its architecture is not a plain decoder"
            raise UnsupportedArchitecture(f"{self.id} cannot be estimated: {reason}", field="model")
        return self.architecture


_NESTED = {
    "mla": MlaShape,
    "dsa": DsaShape,
    "mamba": MambaShape,
    "delta_net": DeltaNetShape,
    "sliding_attention": AttentionShape,
}
_ARCH_FIELDS = {f for f in ModelArchitecture.__dataclass_fields__ if f not in _NESTED}


def architecture_from_entry(entry: Mapping[str, Any]) -> ModelArchitecture:
    """A ModelArchitecture from a catalogue `architecture` object (unknown keys ignored; the
    MLA, Mamba-2 and gated-DeltaNet shapes as nested objects)."""
    values = {k: v for k, v in entry.items() if k in _ARCH_FIELDS and v is not None}
    nested = {name: shape(**entry[name]) for name, shape in _NESTED.items() if entry.get(name)}
    return ModelArchitecture(**values, **nested)
    mla, dsa = entry.get("mla"), entry.get("dsa")
    return ModelArchitecture(
        **values, mla=MlaShape(**mla) if mla else None, dsa=DsaShape(**dsa) if dsa else None
    )


class ModelCatalog:
    """Read-only model repository, looked up by repo id or alias (case-insensitive)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.version: str = document["version"]
        self._records: dict[str, ModelRecord] = {}
        for entry in document["models"]:
            arch = entry.get("architecture")
            self._records[entry["id"]] = ModelRecord(
                id=entry["id"],
                family=entry["family"],
                published_precision=parse_dtype(
                    entry["published_precision"] or "bf16", field="published_precision"
                ),
                architecture=architecture_from_entry(arch) if entry["supported"] and arch else None,
                raw=MappingProxyType(dict(entry)),
            )
        self._index = build_index((e["id"], e.get("aliases", [])) for e in document["models"])
        self._variants = VariantIndex((e["id"], e.get("aliases", [])) for e in document["models"])

    @property
    def ids(self) -> list[str]:
        return list(self._records)

    @property
    def records(self) -> list[ModelRecord]:
        return list(self._records.values())

    def get(self, name: str) -> ModelRecord:
        """The entry for `name` (repo id or alias); raises UnknownModel with near matches."""
        model_id = self._index.get(normalise(name))
        if model_id is None:
            raise UnknownModel(name, near_matches(name, self._records))
        return self._records[model_id]

    def has(self, name: str) -> bool:
        """Whether `name` is a catalogue id or alias (variants not counted)."""
        return normalise(name) in self._index

    def find(self, name: str) -> tuple[ModelRecord, Variant | None]:
        """The entry `name` names, or the entry of the catalogued model it is a variant of
        (with how it was found); raises UnknownModel with near matches."""
        try:
            return self.get(name), None
        except UnknownModel:
            variant = self._variants.find(name)
            if variant is None:
                raise
            return self._records[variant.base_id], variant


@lru_cache(maxsize=4)
def load_model_catalog(path: Path = DATA_DIR / "models.json") -> ModelCatalog:
    """The model catalogue at `path` (read once per process)."""
    return ModelCatalog(json.loads(path.read_text(encoding="utf-8")))
