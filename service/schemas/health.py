"""Body of GET /v1/health."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from service.schemas.common import example


class DatabaseHealth(BaseModel):
    model_config = example({"reachable": True, "backend": "sqlite", "problem": None})

    reachable: bool
    backend: str
    problem: str | None = Field(
        default=None,
        description="Why writes fail although the database may answer (SQLite: a file that "
        "cannot be written, the write lock held by another process); null when none is known.",
    )


class Health(BaseModel):
    """`degraded` while the database is away or cannot be written (`database.problem`):
    estimates still work, quotes are spooled or not stored."""

    model_config = example(
        {
            "status": "ok",
            "model_version": "energy-gnn 2026.11.6+roofline 2026.11.5",
            "calibration_id": None,
            "database": {"reachable": True, "backend": "sqlite"},
            "open_dev_mode": True,
            "auth_mode": "open-dev",
            "catalogs": {"gpus": "2026.11.1", "models": "2026.11.2", "regions": "2026.11.0"},
        }
    )

    status: Literal["ok", "degraded"]
    model_version: str
    calibration_id: str | None
    database: DatabaseHealth
    open_dev_mode: bool
    auth_mode: Literal["open-dev", "api-key"]
    catalogs: dict[str, str]


class Liveness(BaseModel):
    """The process serves (GET /v1/health/live): restart the instance only when this fails."""

    model_config = example({"status": "alive"})

    status: Literal["alive"]


class Readiness(BaseModel):
    """The instance can store quotes: the database answers and its schema is at the code's
    migration head (GET /v1/health/ready; 503 otherwise)."""

    model_config = example(
        {"status": "ready", "database": {"reachable": True, "backend": "sqlite"},
         "schema_revision": "0007", "head_revision": "0007"}
    )  # fmt: skip

    status: Literal["ready"]
    database: DatabaseHealth
    schema_revision: str | None
    head_revision: str | None
