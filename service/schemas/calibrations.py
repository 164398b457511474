"""Bodies of the recalibration endpoints (scope: admin)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictBool, StrictFloat, StrictInt

from service.schemas.common import example

Scope = Literal["tenant", "global"]

SEGMENT_EXAMPLE: dict[str, Any] = {
    "gpu": "H100-SXM5-80GB",
    "family": "llama",
    "n": 42,
    "mean_log_ratio": 0.182,
    "weight": 0.808,
    "log_factor": 0.161,
    "factor": 1.175,
}

FIT_EXAMPLE: dict[str, Any] = {
    "gpu": "H100-SXM5-80GB",
    "engine": "vllm-v1",
    "n": 42,
    "n_total_s": 40,
    "active": True,
    "reason": "held-out error falls",
    "holdout_mape_before": 0.214,
    "holdout_mape_after": 0.097,
    "holdout_latency_mape_before": 0.31,
    "holdout_latency_mape_after": 0.12,
    "multipliers": {"memory_time": 1.12, "idle_power": 0.93},
    "prior": {"memory_efficiency": 0.72, "idle_w": 75.0},
    "fitted": {"memory_efficiency": 0.64, "idle_w": 69.8},
}

CALIBRATION_EXAMPLE: dict[str, Any] = {
    "calibration_id": "c_01JDQ8ZC0G2C3W4X5Y6Z7A8B9C",
    "created_at": "2026-11-22T12:00:00Z",
    "scope": "tenant",
    "tenant": "acme",
    "model_version": "energy-gnn 2026.11.6+roofline 2026.11.5",
    "is_current": True,
    "activated_at": "2026-11-22T12:00:00Z",
    "previous_id": None,
    "holdout_mape_before": 0.214,
    "holdout_mape_after": 0.097,
    "holdout_latency_mape_before": 0.31,
    "holdout_latency_mape_after": 0.12,
    "observations": {
        "total": 60,
        "other_model_version": 0,
        "out_of_range": 1,
        "outliers": 2,
        "fitted": 57,
        "held_out": 57,
        "with_total_s": 55,
    },
    "settings": {
        "shrinkage_k": 10.0,
        "holdout_fraction": 0.2,
        "max_ratio": 20.0,
        "outlier_z": 3.5,
        "min_observations": 8.0,
    },
    "global_correction": {**SEGMENT_EXAMPLE, "gpu": "*", "family": "*"},
    "segments": [SEGMENT_EXAMPLE],
    "fits": [FIT_EXAMPLE],
    "flagged": [{"observation_id": "o_01JDQ8Z9B3R0Y4M1N2P3Q4R5S6", "reason": "outlier"}],
}


class CalibrationIn(BaseModel):
    """How to fit a new calibration. `scope` `tenant` (default) fits on, and applies to, the
    caller's tenant only; `global` fits on every tenant's observations and applies to every
    tenant without a current calibration of its own."""

    model_config = example({"scope": "tenant", "activate": True})

    scope: Scope = "tenant"
    activate: StrictBool = Field(default=True, description="Make it current at once.")
    shrinkage_k: Annotated[StrictFloat, Field(gt=0, le=1e4)] = Field(
        default=10.0, description="Pseudo-count k of the shrinkage weight n / (n + k)."
    )
    holdout_fraction: Annotated[StrictFloat, Field(ge=0, le=0.5)] = Field(
        default=0.2,
        description="Share each fold of the k-fold scoring holds out (k = round(1 / it)); 0: "
        "no scoring, and no GPU's fit becomes active.",
    )
    max_ratio: Annotated[StrictFloat, Field(gt=1, le=1000)] = Field(
        default=20.0, description="Observations beyond [1/max_ratio, max_ratio] x quote: refused."
    )
    outlier_z: Annotated[StrictFloat, Field(gt=0, le=100)] = Field(
        default=3.5, description="Robust z-score of the log ratio beyond which a point is flagged."
    )
    min_observations: Annotated[StrictInt, Field(ge=1, le=100_000)] = Field(
        default=8, description="Fewer observations of a GPU and engine and its fit stays inactive."
    )


class RollbackIn(BaseModel):
    model_config = example({"scope": "tenant"})

    scope: Scope = "tenant"


class SegmentOut(BaseModel):
    """One GPU x family segment's residual energy correction on top of its GPU's refit: `n`
    observations of mean ln(observed/refitted) `mean_log_ratio`, kept with `weight` = n / (n + k);
    `factor` = exp(`log_factor`), applied only where the GPU's fit is active. The global one is
    the pooled mean, reported and never applied (weight 0): no correction crosses GPUs."""

    model_config = example(SEGMENT_EXAMPLE)

    gpu: str
    family: str
    n: int
    mean_log_ratio: float
    weight: float
    log_factor: float
    factor: float


class ObservationCounts(BaseModel):
    model_config = example(CALIBRATION_EXAMPLE["observations"])

    total: int
    other_model_version: int = Field(description="Against quotes of another model version.")
    out_of_range: int
    outliers: int
    fitted: int
    held_out: int = Field(description="Scored out of fold (each once) by the k-fold.")
    with_total_s: int = Field(default=0, description="Fitted with a measured total time.")


class GpuFitOut(BaseModel):
    """One GPU's refit under one serving engine: its physical coefficients (`prior`: the
    catalogue's figures, `fitted`: as refitted, `multipliers`: fitted / prior of each refitted
    quantity), fitted on `n` observations (`n_total_s` with a measured total time), its k-fold
    error (energy and total time, fractions) before and after, and whether quotes of that GPU
    and engine use it (`active`) and why (`reason`)."""

    model_config = example(FIT_EXAMPLE)

    gpu: str
    engine: str
    n: int
    n_total_s: int
    active: bool
    reason: str
    holdout_mape_before: float | None
    holdout_mape_after: float | None
    holdout_latency_mape_before: float | None
    holdout_latency_mape_after: float | None
    multipliers: dict[str, float]
    prior: dict[str, float]
    fitted: dict[str, float]


class FlaggedOut(BaseModel):
    model_config = example(CALIBRATION_EXAMPLE["flagged"][0])

    observation_id: str
    reason: Literal["out_of_range", "outlier"]


class CalibrationOut(BaseModel):
    """A stored calibration: per GPU and engine its refitted coefficients (`fits`, each active
    or not and why), per GPU x family its residual corrections, what it was fitted on, and its
    k-fold error as applied (`holdout_mape_*` energy, `holdout_latency_mape_*` total time,
    fractions; null when nothing was scored)."""

    model_config = example(CALIBRATION_EXAMPLE)

    calibration_id: str
    created_at: datetime
    scope: Scope
    tenant: str | None = Field(description="The owning tenant (null for a global calibration).")
    model_version: str = Field(description="The estimator version whose quotes it corrects.")
    is_current: bool
    activated_at: datetime | None
    previous_id: str | None = Field(description="What a rollback would make current again.")
    holdout_mape_before: float | None
    holdout_mape_after: float | None
    holdout_latency_mape_before: float | None = None
    holdout_latency_mape_after: float | None = None
    observations: ObservationCounts
    settings: dict[str, float]
    global_correction: SegmentOut
    segments: list[SegmentOut]
    fits: list[GpuFitOut] = Field(default_factory=list)
    flagged: list[FlaggedOut] = Field(description="The tenant's observations not fitted.")


class CalibrationList(BaseModel):
    model_config = example({"items": [CALIBRATION_EXAMPLE]})

    items: list[CalibrationOut]


class RollbackOut(BaseModel):
    """The calibration taken out of service and the one now current (null: uncalibrated)."""

    model_config = example({"rolled_back": "c_01JDQ8ZC0G2C3W4X5Y6Z7A8B9C", "current": None})

    rolled_back: str
    current: CalibrationOut | None
