"""A tenant's registered model read into what the estimator prices: the architecture its
config.json describes and the weights' precision (the one named at registration, else the
config's published one)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from service.catalog.hf_config import read_config
from service.core.architecture import ModelArchitecture
from service.core.dtypes import DType, parse_dtype

REGISTERED_FAMILY = "registered"


@dataclass(frozen=True, slots=True)
class RegisteredArchitecture:
    """What a registered model is priced as; `id` is the repo id its tenant gave it."""

    id: str
    model_type: str
    architecture: ModelArchitecture
    published_precision: DType
    notes: tuple[str, ...]

    def description(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The model as GET /v1/models lists it (a catalogue entry's fields, and the config)."""
        return {
            "id": self.id,
            "family": REGISTERED_FAMILY,
            "model_type": self.model_type,
            "registered": True,
            "supported": True,
            "published_precision": self.published_precision.value,
            "architecture": asdict(self.architecture),
            "notes": list(self.notes),
            "sources": {"architecture": "config.json registered by this tenant"},
            "config": dict(config),
        }


def registered_architecture(
    model_id: str, config: Mapping[str, Any], weights: str | None
) -> RegisteredArchitecture:
    """Read `config` (raises the core errors read_config raises, naming the config key);
    `weights`, when given, is the weights' precision instead of the config's."""
    read = read_config(config)
    published = read.published_precision
    if weights is not None:
        published = parse_dtype(weights, field="weights")
    return RegisteredArchitecture(
        model_id, read.model_type, read.architecture, published, read.notes
    )
