"""Bodies of the recalibration endpoints."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from llm_energy_quotes_client.models.base import Document


class Segment(Document):
    """One GPU x model family correction: `factor` = exp(`log_factor`) from `n` observations."""

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


class Flagged(Document):
    observation_id: str
    reason: str


class Calibration(Document):
    """A stored calibration, and its error on the held-out newest observations
    (`holdout_mape_before`/`_after`, fractions; None when none was held out)."""

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
    observations: ObservationCounts
    settings: dict[str, float]
    global_correction: Segment
    segments: list[Segment]
    flagged: list[Flagged] = Field(default_factory=list)


class CalibrationList(Document):
    items: list[Calibration]


class Rollback(Document):
    """The calibration taken out of service and the one now current (None: uncalibrated)."""

    rolled_back: str
    current: Calibration | None
