"""Bodies of the billing endpoints (GET /v1/quotes...) and of observations."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, StrictFloat

from service.schemas.common import IsoDatetime, StorableText, example

QUOTE_SUMMARY_EXAMPLE: dict[str, Any] = {
    "quote_id": "q_01JDQ8Z3V5Q4XJ8M2W7K9T0ABC",
    "created_at": "2026-11-22T10:00:00Z",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM5-80GB",
    "gpu_count": 2,
    "model_version": "energy-gnn 2026.11.26+roofline 2026.11.7",
    "calibration_id": None,
    "gpu_j": 812.4,
    "gpu_j_low": 700.0,
    "gpu_j_high": 950.0,
    "facility_j": 974.9,
    "total_s": 3.69,
    "total_g": 0.129,
    "total_g_low": 0.110,
    "total_g_high": 0.150,
    "operational_g": 0.108,
    "operational_g_low": 0.092,
    "operational_g_high": 0.127,
    "embodied_g": 0.021,
    "embodied_g_low": 0.013,
    "embodied_g_high": 0.052,
    "water_l": 0.0032,
    "water_l_low": 0.0012,
    "water_l_high": 0.0067,
    "metadata": {"request_id": "gw-123", "customer": "acme"},
}


class QuoteSummary(BaseModel):
    """One row of the billing pull."""

    model_config = example(QUOTE_SUMMARY_EXAMPLE)

    quote_id: str
    created_at: datetime
    model: str
    gpu: str
    gpu_count: int
    model_version: str
    calibration_id: str | None
    gpu_j: float
    # Null only for a stored quote whose document does not carry the figure.
    gpu_j_low: float | None
    gpu_j_high: float | None
    facility_j: float
    total_s: float
    total_g: float
    total_g_low: float | None
    total_g_high: float | None
    operational_g: float | None
    operational_g_low: float | None
    operational_g_high: float | None
    embodied_g: float | None
    embodied_g_low: float | None
    embodied_g_high: float | None
    water_l: float | None
    water_l_low: float | None
    water_l_high: float | None
    metadata: dict[str, Any] | None


class QuotePage(BaseModel):
    """Oldest first; pass `next_cursor` back as `cursor` until it is null. Keep
    `resume_cursor` and pass it as `cursor` on the next pull to continue after the last row."""

    model_config = example(
        {
            "items": [QUOTE_SUMMARY_EXAMPLE],
            "next_cursor": None,
            "resume_cursor": "WyIyMDI2LTExLTIyVDEwOjAwOjAwKzAwOjAwIiwgInFfMDFKRFE4WjNW"
            "NVE0WEo4TTJXN0s5VDBBQkMiXQ",
        }
    )

    items: list[QuoteSummary]
    next_cursor: str | None = Field(description="The next page's cursor; null at the end.")
    resume_cursor: str | None = Field(
        description="Continues after the last row returned so far, also at the end (null only "
        "while nothing has been returned): the cursor to start the next billing pull from."
    )


class ObservationIn(BaseModel):
    """What was measured when the quoted request ran."""

    model_config = example(
        {
            "gpu_j": 790.0,
            "total_s": 3.5,
            "measured_with": "nvml",
            "measured_at": "2026-11-22T10:00:05Z",
        }
    )

    gpu_j: Annotated[StrictFloat, Field(gt=0, le=1e12)]
    total_s: Annotated[StrictFloat, Field(gt=0, le=1e7)] | None = None
    measured_with: Annotated[StorableText, Field(min_length=1, max_length=50)]
    measured_at: IsoDatetime


class ObservationOut(BaseModel):
    model_config = example(
        {
            "observation_id": "o_01JDQ8Z9B3R0Y4M1N2P3Q4R5S6",
            "quote_id": "q_01JDQ8Z3V5Q4XJ8M2W7K9T0ABC",
            "gpu_j": 790.0,
            "total_s": 3.5,
            "measured_with": "nvml",
            "measured_at": "2026-11-22T10:00:05Z",
            "created_at": "2026-11-22T10:00:06Z",
        }
    )

    observation_id: str
    quote_id: str
    gpu_j: float
    total_s: float | None
    measured_with: str
    measured_at: datetime
    created_at: datetime


class QuoteDetail(BaseModel):
    """A stored quote: the request as asked, the response as answered, and observations."""

    model_config = example(
        {**QUOTE_SUMMARY_EXAMPLE, "request": {}, "response": {}, "observations": []}
    )

    quote_id: str
    created_at: datetime
    model: str
    gpu: str
    gpu_count: int
    model_version: str
    calibration_id: str | None
    request: dict[str, Any]
    response: dict[str, Any]
    observations: list[ObservationOut]
