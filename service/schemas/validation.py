"""Which measurements back a quote or a GPU, and the held-out error at its evidence level."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from service.schemas.common import example

HELD_OUT_EXAMPLE = {
    "level": "family",
    "rows": 412,
    "mape_pct": 21.0,
    "lower_ratio": 0.8,
    "upper_ratio": 1.3,
}

BACKING_EXAMPLE: dict[str, Any] = {
    "value": "H100-SXM5-80GB",
    "fitted_on": True,
    "measured_rows": {"mlenergy-v3": 150},
}

VALIDATION_EXAMPLE = {
    "level": "family",
    "gpu": BACKING_EXAMPLE,
    "engine": {"value": "vllm-v1", "fitted_on": True, "measured_rows": {"mlenergy-v3": 150}},
    "precision": {"value": "bf16", "fitted_on": True, "measured_rows": {"mlenergy-v2": 200}},
    "model_family": {"value": "llama", "fitted_on": True, "measured_rows": {"mlenergy-v2": 60}},
    "held_out": {"energy": HELD_OUT_EXAMPLE},
}


class HeldOutErrorOut(BaseModel):
    """The held-out error behind one quantity's interval: the level whose residuals gave it
    (a wider one when the quote's own level has too few rows), their count, MAPE [%] and the
    interval's ratios to the estimate."""

    model_config = example(HELD_OUT_EXAMPLE)

    level: str
    rows: int
    mape_pct: float
    lower_ratio: float
    upper_ratio: float


class BackingOut(BaseModel):
    """One input of the quote, whether the cost model was fitted on it, and the measured rows
    (by source) behind it in the held-out validation."""

    model_config = example(BACKING_EXAMPLE)

    value: str
    fitted_on: bool
    measured_rows: dict[str, int]


class ValidationOut(BaseModel):
    """Which measurements back the quote and the held-out error at its evidence level
    (`family`, `custom`, `precision`, `engine`, `gpu`, `vendor`: what is held out)."""

    model_config = example(VALIDATION_EXAMPLE)

    level: str
    gpu: BackingOut
    engine: BackingOut
    precision: BackingOut
    model_family: BackingOut
    held_out: dict[str, HeldOutErrorOut] = Field(
        description="By quantity: energy, prefill (of a static batch, or time to first token "
        "under load for a request joining a running server), tpot (time per output token), total."
    )


class GpuValidationOut(BaseModel):
    """What a GPU's figures were validated on: whether the cost model was fitted on it, the
    evidence level of a quote on it (with a fitted engine, precision and family), the measured
    rows behind it by source, and the held-out error at that level by quantity."""

    model_config = example(
        {
            "fitted_on": False,
            "level": "gpu",
            "measured_rows": {"aiconfigurator-silicon": 389},
            "held_out": {"tpot": {**HELD_OUT_EXAMPLE, "level": "gpu"}},
        }
    )

    fitted_on: bool
    level: str
    measured_rows: dict[str, int]
    held_out: dict[str, HeldOutErrorOut] = Field(
        description="By quantity: energy, prefill (a static batch's), ttft (time to first token "
        "of a request joining a loaded server), tpot, total."
    )
