"""Kubernetes-style probes: GET /v1/health/live and GET /v1/health/ready (public).

Liveness answers from memory: a process that answers is alive, and restarting it would not
bring an absent database back. Readiness asks the database: an instance whose database is away,
cannot be written, or whose schema is behind the code's migrations cannot store quotes, so it
should take no new traffic until it can (503 with the reason; GET /v1/health says more).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.exc import SQLAlchemyError

from service.api.deps import ServicesDep, public_route
from service.api.openapi import problem_responses
from service.db import migrate
from service.errors import DatabaseUnavailable
from service.schemas.health import DatabaseHealth, Liveness, Readiness

router = APIRouter(prefix="/v1/health", tags=["operations"], dependencies=[Depends(public_route)])


@router.get("/live", response_model=Liveness, responses=problem_responses())
async def live() -> Liveness:
    """200 while the process serves."""
    return Liveness(status="alive")


@router.get("/ready", response_model=Readiness, responses=problem_responses(503))
async def ready(services: ServicesDep) -> Readiness:
    """200 when quotes can be stored; 503 (with Retry-After) when the database is unreachable,
    cannot be written (service.db.sqlite_guard) or its schema is not at the migration head."""
    database, retry_after = services.database, str(services.settings.retry_after_s)
    head = migrate.head_revision()
    try:
        revision = await run_in_threadpool(migrate.current_revision, database)
    except SQLAlchemyError:
        services.metrics.db_errors.labels(operation="health").inc()
        raise DatabaseUnavailable(
            "the database is unreachable: quotes cannot be stored",
            headers={"Retry-After": retry_after},
        ) from None
    problem = await run_in_threadpool(database.write_problem)
    if problem is not None:
        raise DatabaseUnavailable(
            f"the database cannot be written: {problem}", headers={"Retry-After": retry_after}
        )
    if revision != head:
        raise DatabaseUnavailable(
            f"the database schema is at revision {revision!r}, the code needs {head!r}: run "
            "`alembic upgrade head`",
            headers={"Retry-After": retry_after},
        )
    return Readiness(
        status="ready",
        database=DatabaseHealth(reachable=True, backend=database.backend),
        schema_revision=revision,
        head_revision=head,
    )
