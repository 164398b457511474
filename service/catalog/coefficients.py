"""Fitted cost-model coefficients, stored with the provenance of their fit."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from service.catalog.lookup import DATA_DIR
from service.core.coefficients import (
    CostModelCoefficients,
    EnergyInterval,
    PowerCoefficients,
    RooflineCoefficients,
)

COEFFICIENTS_PATH = DATA_DIR / "cost_model_coefficients.json"


def coefficients_from_document(document: dict[str, Any]) -> CostModelCoefficients:
    return CostModelCoefficients(
        version=document["version"],
        roofline=RooflineCoefficients(**document["roofline"]),
        power=PowerCoefficients(**document["power"]),
        energy_interval=EnergyInterval(**document["energy_interval"]),
    )


@lru_cache(maxsize=4)
def load_cost_model_coefficients(path: Path = COEFFICIENTS_PATH) -> CostModelCoefficients:
    """The fitted coefficients at `path` (read once per process)."""
    return coefficients_from_document(json.loads(path.read_text(encoding="utf-8")))
