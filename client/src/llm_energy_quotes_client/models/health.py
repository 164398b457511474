"""Body of GET /v1/health."""

from __future__ import annotations

from pydantic import Field

from llm_energy_quotes_client.models.base import Document


class DatabaseHealth(Document):
    reachable: bool
    backend: str


class Health(Document):
    """`status` is `degraded` while the database is away: estimates still answer, unstored."""

    status: str
    model_version: str
    calibration_id: str | None = None
    database: DatabaseHealth
    open_dev_mode: bool
    auth_mode: str
    catalogs: dict[str, str] = Field(default_factory=dict)
