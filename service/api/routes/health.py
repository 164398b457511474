"""GET /v1/health and GET /metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.security import HTTPAuthorizationCredentials
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import SQLAlchemyError

from service.api.deps import ServicesDep, bearer_scheme, public_route
from service.api.keys import DEV_TENANT
from service.api.openapi import problem_responses
from service.db.repositories import CalibrationRepository
from service.db.tables import GLOBAL_SCOPE
from service.schemas.health import DatabaseHealth, Health

router = APIRouter(tags=["operations"], dependencies=[Depends(public_route)])


@router.get(
    "/v1/health",
    response_model=Health,
    responses=problem_responses(),
    openapi_extra={"security": [{}, {"HTTPBearer": []}]},  # a key is optional here
)
def health(
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Health:
    """Model version, calibration, database reachability (and why writes fail, if they do)
    and whether the open dev mode is on.

    `calibration_id` is the calibration pricing the caller's quotes when a valid key is sent
    (or in the open dev mode), else the current global one; no key is needed."""
    database = services.database
    reachable = database.is_reachable()
    calibration_id = None
    open_mode = services.keys.open_mode()  # keeps its last answer while the database is away
    tenant = DEV_TENANT if open_mode else None
    if credentials is not None and not open_mode:
        principal = services.keys.authenticate(credentials.credentials)
        tenant = principal.tenant if principal is not None else None
    if reachable:
        try:
            with database.sessions() as session:
                repository = CalibrationRepository(session)
                current = (
                    repository.current_for(tenant)
                    if tenant is not None
                    else repository.current_in_scope(GLOBAL_SCOPE, "")
                )
            calibration_id = current.id if current else None
        except SQLAlchemyError:
            reachable = False
    problem = database.write_problem()
    if not reachable or problem is not None:
        services.metrics.db_errors.labels(operation="health").inc()
    estimator = services.estimator
    return Health(
        status="ok" if reachable and problem is None else "degraded",
        model_version=estimator.model_version,
        calibration_id=calibration_id,
        database=DatabaseHealth(reachable=reachable, backend=database.backend, problem=problem),
        open_dev_mode=open_mode,
        auth_mode="open-dev" if open_mode else "api-key",
        catalogs={
            "gpus": estimator.gpus.version,
            "models": estimator.models.version,
            "regions": estimator.regions.version,
            "coefficients": estimator.coefficients.version,
        },
    )


@router.get("/metrics", include_in_schema=False)
def metrics(services: ServicesDep) -> Response:
    """Prometheus text exposition."""
    return Response(services.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
