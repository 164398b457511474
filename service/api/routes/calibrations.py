"""Recalibration (scope: admin): fit from observations, read, make current, roll back."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from service.api.deps import AdminCaller, ServicesDep, SessionDep
from service.api.keys import OPERATOR_SCOPE
from service.api.openapi import problem_responses
from service.db.repositories import CalibrationRepository
from service.db.tables import GLOBAL_SCOPE, TENANT_SCOPE
from service.errors import NotFound
from service.quotes.recalibration import activate, calibration_out, create_calibration, rollback
from service.schemas.calibrations import (
    CalibrationIn,
    CalibrationList,
    CalibrationOut,
    RollbackIn,
    RollbackOut,
)

router = APIRouter(prefix="/v1/calibrations", tags=["calibrations"])

# Ids are a prefix and a ULID: anything else (a NUL, which PostgreSQL refuses) is a 422.
CalibrationId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


@router.post(
    "",
    response_model=CalibrationOut,
    status_code=201,
    responses=problem_responses(401, 403, 413, 422, 503),
)
def post_calibration(
    caller: AdminCaller,
    session: SessionDep,
    services: ServicesDep,
    body: CalibrationIn | None = None,
) -> CalibrationOut:
    """Fit a calibration from stored observations (the caller's tenant's, or with `scope:
    global` and an operator key every tenant's): per GPU and serving engine the physical
    coefficients (achievable fractions of the peaks, power, host overheads) refitted from
    measured energy and total time, shrunk toward the catalogue's where observations are few,
    and per GPU x family a shrunk residual energy factor; scored by k-fold
    (`holdout_mape_*`, `holdout_latency_mape_*`). A GPU's fit moves that GPU's quotes only,
    and only when active: with `min_observations` and a held-out error that falls (each fit's
    `reason` says). Made current unless `activate` is false."""
    estimator = services.estimator
    calibration = create_calibration(
        session,
        caller.tenant,
        body or CalibrationIn(),
        estimator=estimator,
        operator=caller.allows(OPERATOR_SCOPE),
    )
    services.calibrations.invalidate_after_commit(session)
    return calibration_out(calibration)


@router.get("", response_model=CalibrationList, responses=problem_responses(401, 403, 422, 503))
def list_calibrations(
    caller: AdminCaller,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> CalibrationList:
    """The tenant's and the global calibrations, newest first."""
    rows = CalibrationRepository(session).list_visible(caller.tenant, limit)
    return CalibrationList(items=[calibration_out(row) for row in rows])


@router.get(
    "/current", response_model=CalibrationOut, responses=problem_responses(401, 403, 404, 503)
)
def current_calibration(caller: AdminCaller, session: SessionDep) -> CalibrationOut:
    """The calibration applied to the tenant's new quotes: its own current one, else the
    current global one; 404 when quotes are uncalibrated."""
    current = CalibrationRepository(session).current_for(caller.tenant)
    if current is None:
        raise NotFound("no calibration is current: quotes are uncalibrated")
    return calibration_out(current)


@router.post(
    "/rollback", response_model=RollbackOut, responses=problem_responses(401, 403, 409, 422, 503)
)
def rollback_calibration(
    caller: AdminCaller,
    session: SessionDep,
    services: ServicesDep,
    body: RollbackIn | None = None,
) -> RollbackOut:
    """Take the scope's current calibration out of service and make current the one it
    replaced (none: uncalibrated); 409 when the scope has no current calibration. The global
    scope takes an operator key."""
    scope = GLOBAL_SCOPE if body is not None and body.scope == "global" else TENANT_SCOPE
    rolled_back, current = rollback(
        session, caller.tenant, scope, operator=caller.allows(OPERATOR_SCOPE)
    )
    services.calibrations.invalidate_after_commit(session)
    return RollbackOut(
        rolled_back=rolled_back.id, current=calibration_out(current) if current else None
    )


@router.get(
    "/{calibration_id}",
    response_model=CalibrationOut,
    responses=problem_responses(401, 403, 404, 422, 503),
)
def get_calibration(
    calibration_id: CalibrationId, caller: AdminCaller, session: SessionDep
) -> CalibrationOut:
    """One of the tenant's calibrations, or a global one (another tenant's answers 404)."""
    calibration = CalibrationRepository(session).visible(caller.tenant, calibration_id)
    if calibration is None:
        raise NotFound(f"no calibration {calibration_id!r}")
    return calibration_out(calibration)


@router.post(
    "/{calibration_id}/activate",
    response_model=CalibrationOut,
    responses=problem_responses(401, 403, 404, 422, 503),
)
def activate_calibration(
    calibration_id: CalibrationId, caller: AdminCaller, session: SessionDep, services: ServicesDep
) -> CalibrationOut:
    """Make this calibration its scope's current one (roll back or forward to it); a global
    one takes an operator key."""
    calibration = activate(
        session, caller.tenant, calibration_id, operator=caller.allows(OPERATOR_SCOPE)
    )
    services.calibrations.invalidate_after_commit(session)
    return calibration_out(calibration)
