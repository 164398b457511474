"""Bodies of the billing pull (GET /v1/quotes...) and of observations."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llm_energy_quotes_client.models.base import Document


class QuoteSummary(Document):
    """One row of the billing pull: the quote's headline figures and the caller's metadata."""

    quote_id: str
    created_at: datetime
    model: str
    gpu: str
    gpu_count: int
    model_version: str
    calibration_id: str | None = None
    gpu_j: float
    facility_j: float
    total_s: float
    total_g: float
    metadata: dict[str, Any] | None = None


class QuotePage(Document):
    """One page, oldest first. `next_cursor` is None at the end; keep `resume_cursor` to start
    the next pull after the last row seen."""

    items: list[QuoteSummary]
    next_cursor: str | None
    resume_cursor: str | None = None


@dataclass(frozen=True)
class CsvPage:
    """One page of `format=csv`: the CSV text (header row included) and the cursors the
    service sent in `X-Next-Cursor` / `X-Resume-Cursor`."""

    text: str
    next_cursor: str | None
    resume_cursor: str | None


class Observation(Document):
    """What was measured when a quoted request ran, as stored."""

    observation_id: str
    quote_id: str
    gpu_j: float
    total_s: float | None = None
    measured_with: str
    measured_at: datetime
    created_at: datetime


class QuoteDetail(Document):
    """A stored quote: the request as asked, the response as answered, its observations."""

    quote_id: str
    created_at: datetime
    model: str
    gpu: str
    gpu_count: int
    model_version: str
    calibration_id: str | None = None
    request: dict[str, Any]
    response: dict[str, Any]
    observations: list[Observation]
