"""Bodies of the recalibration endpoints."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from llm_energy_quotes_client.models.base import Document


class Segment(Document):
    """One GPU x model family residual correction on top of its GPU's refit: `factor` =
    exp(`log_factor`) from `n` observations (the global one: pooled, never applied)."""

    gpu: str
    family: str
    n: int
    mean_log_ratio: float
    weight: float
    log_factor: float
    factor: float


class ObservationCounts(Document):
    total: int
    other_model_version: int
    out_of_range: int
    outliers: int
    fitted: int
    held_out: int
    with_total_s: int = 0


class GpuFit(Document):
    """One GPU's refit under one engine: its coefficients at the prior and as fitted, its
    k-fold error, and whether quotes of that GPU and engine use it (`active`) and why."""

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


class Flagged(Document):
    observation_id: str
    reason: str


class Calibration(Document):
    """A stored calibration, and its k-fold error as applied (`holdout_mape_*` energy,
    `holdout_latency_mape_*` total time, fractions; None when nothing was scored)."""

    calibration_id: str
    created_at: datetime
    scope: str
    tenant: str | None
    model_version: str
    is_current: bool
    activated_at: datetime | None
    previous_id: str | None
    holdout_mape_before: float | None
    holdout_mape_after: float | None
    holdout_latency_mape_before: float | None = None
    holdout_latency_mape_after: float | None = None
    observations: ObservationCounts
    settings: dict[str, float]
    global_correction: Segment
    segments: list[Segment]
    fits: list[GpuFit] = Field(default_factory=list)
    flagged: list[Flagged] = Field(default_factory=list)


class CalibrationList(Document):
    items: list[Calibration]


class Rollback(Document):
    """The calibration taken out of service and the one now current (None: uncalibrated)."""

    rolled_back: str
    current: Calibration | None
