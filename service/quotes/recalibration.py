"""Recalibration, the adapter between the database and the pure fit in
`service.pricing.calibration`: fit a calibration from stored observations, make one current,
roll back. Quotes find the calibration that applies to their tenant through the registry in
`service.quotes.calibration_registry`.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from sqlalchemy.orm import Session

from service.catalog.registered import RegisteredArchitecture, registered_architecture
from service.core.cost_model_errors import CostModelError
from service.core.estimate import estimate_workloads
from service.db.base import utc_now
from service.db.ids import new_calibration_id
from service.db.model_registry import RegisteredModelRepository
from service.db.repositories import CalibrationRepository, ObservationRepository
from service.db.tables import GLOBAL_SCOPE, TENANT_SCOPE, Calibration, Observation, Quote
from service.errors import Conflict, Forbidden, InvalidRequest, NotFound, ServiceError
from service.pricing.calibration import (
    ActiveCalibration,
    CalibrationFit,
    Corrections,
    FitSettings,
    PhysicalPoint,
    fit_calibration,
    physical_terms,
)
from service.pricing.estimator import Estimator
from service.quotes.refitted import fit_out, refitted_coefficients
from service.schemas.calibrations import (
    CalibrationIn,
    CalibrationOut,
    FlaggedOut,
    ObservationCounts,
    SegmentOut,
)
from service.schemas.estimate_request import EstimateRequest

logger = logging.getLogger(__name__)


def _registered(
    session: Session, tenant: str, request: EstimateRequest, estimator: Estimator
) -> RegisteredArchitecture | None:
    """The tenant's registered model the request names, as quoting found it (a catalogue name
    wins); None when it names none, or one that can no longer be read."""
    name = request.model
    if name is None or estimator.models.has(name):
        return None
    row = RegisteredModelRepository(session).get(tenant, name)
    if row is None:
        return None
    try:
        return registered_architecture(row.model_id, row.config, row.weights)
    except CostModelError:
        return None


def _point(
    session: Session, observation: Observation, quote: Quote, estimator: Estimator
) -> PhysicalPoint | None:
    """The observation against its quote re-priced uncalibrated (None if unreadable: a
    document without energy, a request that no longer resolves, such as a tenant's model
    since deleted)."""
    energy = quote.response.get("energy") or {}
    try:
        gpu_j = float(energy["gpu_j"])
        factor = float(energy.get("calibration_factor", 1.0))
        request = EstimateRequest.model_validate(quote.request)
        registered = _registered(session, quote.tenant, request, estimator)
        resolved = estimator.resolve(request, registered)
    except (KeyError, TypeError, ValueError, ServiceError, CostModelError):
        return None
    if not (math.isfinite(gpu_j) and math.isfinite(factor) and factor > 0):
        return None
    coefficients = estimator.engine_coefficients.get(resolved.engine, estimator.coefficients)
    try:
        estimates, errors = estimate_workloads(
            resolved.architecture, [resolved.workload], resolved.deployment, coefficients
        )
    except CostModelError:
        return None
    if errors or not estimates.positions:
        return None
    return PhysicalPoint(
        observation_id=observation.id,
        gpu=quote.gpu_id,
        engine=resolved.engine,
        model=quote.model_id,
        family=estimator.family_of(resolved),
        terms=physical_terms(estimates).take([0]),
        quoted_gpu_j=gpu_j / factor,
        observed_gpu_j=observation.gpu_j,
        observed_total_s=observation.total_s,
        received_at=observation.created_at,
    )


def require_operator(operator: bool, what: str) -> None:
    """Forbidden unless the caller is the operator: a global calibration prices every tenant's
    quotes and is fitted on every tenant's observations, so no tenant's key may change it."""
    if not operator:
        raise Forbidden(f"{what} changes every tenant's quotes: it takes an operator key")


def observation_points(
    session: Session, tenant: str, scope: str, estimator: Estimator
) -> tuple[list[PhysicalPoint], int, dict[str, str]]:
    """The observations a calibration of `scope` for `tenant` fits (every tenant's for the
    global scope), each against its quote re-priced uncalibrated by `estimator`: the points
    of its model version that can be read, how many observations are stored for the scope,
    and each point's tenant by observation id."""
    rows = ObservationRepository(session).with_quotes(None if scope == GLOBAL_SCOPE else tenant)
    points: list[PhysicalPoint] = []
    owners: dict[str, str] = {}
    for observation, quote in rows:
        if quote.model_version != estimator.model_version:
            continue
        point = _point(session, observation, quote, estimator)
        if point is not None:
            points.append(point)
            owners[observation.id] = observation.tenant
    return points, len(rows), owners


def create_calibration(
    session: Session,
    tenant: str,
    body: CalibrationIn,
    *,
    estimator: Estimator,
    operator: bool = False,
) -> Calibration:
    """Fit a calibration on the observations of `tenant` (every tenant's for scope global,
    which only the `operator` may fit) against quotes of `estimator`'s model version, store it,
    and make it current if asked."""
    model_version = estimator.model_version
    scope = GLOBAL_SCOPE if body.scope == "global" else TENANT_SCOPE
    if scope == GLOBAL_SCOPE:
        require_operator(operator, "a global calibration")
    points, total, owners = observation_points(session, tenant, scope, estimator)
    other_version = total - len(points)
    settings = FitSettings(
        body.shrinkage_k,
        body.holdout_fraction,
        body.max_ratio,
        body.outlier_z,
        body.min_observations,
    )
    fit = fit_calibration(points, settings)
    if fit.fitted == 0:
        raise InvalidRequest(
            f"no observation to fit: {total} stored for this scope, {other_version} against "
            f"quotes of another model version, {len(fit.flagged)} flagged; post observations "
            f"against quotes of {model_version!r} first"
        )
    now = utc_now()
    calibration = Calibration(
        id=new_calibration_id(),
        created_at=now,
        tenant=tenant,
        scope=scope,
        model_version=model_version,
        is_current=False,
        payload=_payload(fit, total, other_version, owners, tenant, estimator),
    )
    CalibrationRepository(session).add(calibration)
    if body.activate:
        make_current(session, calibration)
    return calibration


def _payload(
    fit: CalibrationFit,
    total: int,
    other_version: int,
    owners: dict[str, str],
    tenant: str,
    estimator: Estimator,
) -> dict[str, Any]:
    settings = fit.settings
    return {
        "corrections": fit.corrections.to_payload(),
        "coefficients": {
            f"{gpu_fit.gpu}|{gpu_fit.engine}": refitted_coefficients(gpu_fit, estimator)
            for gpu_fit in fit.corrections.fits.values()
        },
        "settings": {
            "shrinkage_k": settings.shrinkage_k,
            "holdout_fraction": settings.holdout_fraction,
            "max_ratio": settings.max_ratio,
            "outlier_z": settings.outlier_z,
            "min_observations": float(settings.min_observations),
        },
        "observations": {
            "total": total,
            "other_model_version": other_version,
            "out_of_range": fit.count_out_of_range,
            "outliers": fit.count_outliers,
            "fitted": fit.fitted,
            "held_out": fit.held_out,
            "with_total_s": fit.with_latency,
        },
        "holdout_mape_before": fit.holdout_mape_before,
        "holdout_mape_after": fit.holdout_mape_after,
        "holdout_latency_mape_before": fit.holdout.latency_before,
        "holdout_latency_mape_after": fit.holdout.latency_after,
        # only the fitting tenant's own observation ids are ever shown
        "flagged": [
            {"observation_id": oid, "reason": str(flag)}
            for oid, flag in fit.flagged.items()
            if owners.get(oid) == tenant
        ],
    }


def make_current(session: Session, calibration: Calibration) -> Calibration:
    """Make `calibration` its scope's current one, remembering the one it replaces."""
    if calibration.is_current:
        return calibration
    repository = CalibrationRepository(session)
    previous = repository.current_in_scope(calibration.scope, calibration.tenant)
    repository.deactivate_scope(calibration.scope, calibration.tenant)
    calibration.previous_id = previous.id if previous is not None else None
    calibration.is_current = True
    calibration.activated_at = utc_now()
    session.flush()
    return calibration


def activate(
    session: Session, tenant: str, calibration_id: str, *, operator: bool = False
) -> Calibration:
    """Make a calibration `tenant` may see current again (a roll back or forward to it); a
    global one only for the `operator`."""
    calibration = CalibrationRepository(session).visible(tenant, calibration_id)
    if calibration is None:
        raise NotFound(f"no calibration {calibration_id!r}")
    if calibration.scope == GLOBAL_SCOPE:
        require_operator(operator, "activating a global calibration")
    return make_current(session, calibration)


def rollback(
    session: Session, tenant: str, scope: str, *, operator: bool = False
) -> tuple[Calibration, Calibration | None]:
    """Take the scope's current calibration out of service and make current again the one it
    replaced (none: the scope goes uncalibrated); the global scope only for the `operator`.
    Returns (rolled back, now current)."""
    if scope == GLOBAL_SCOPE:
        require_operator(operator, "rolling back the global calibration")
    repository = CalibrationRepository(session)
    current = repository.current_in_scope(scope, tenant)
    if current is None:
        raise Conflict(f"no current {scope} calibration to roll back")
    current.is_current = False
    restored = None
    if current.previous_id is not None:
        restored = repository.visible(tenant, current.previous_id)
    if restored is not None:
        restored.is_current = True
        restored.activated_at = utc_now()
    session.flush()
    return current, restored


def calibration_out(calibration: Calibration) -> CalibrationOut:
    payload = calibration.payload
    corrections = Corrections.from_payload(payload["corrections"])
    is_global = calibration.scope == GLOBAL_SCOPE
    return CalibrationOut(
        calibration_id=calibration.id,
        created_at=calibration.created_at,
        scope="global" if is_global else "tenant",
        tenant=None if is_global else calibration.tenant,
        model_version=calibration.model_version,
        is_current=calibration.is_current,
        activated_at=calibration.activated_at,
        previous_id=calibration.previous_id,
        holdout_mape_before=payload.get("holdout_mape_before"),
        holdout_mape_after=payload.get("holdout_mape_after"),
        holdout_latency_mape_before=payload.get("holdout_latency_mape_before"),
        holdout_latency_mape_after=payload.get("holdout_latency_mape_after"),
        observations=ObservationCounts.model_validate(payload["observations"]),
        settings=payload["settings"],
        global_correction=SegmentOut.model_validate(corrections.global_correction.to_payload()),
        segments=[SegmentOut.model_validate(s.to_payload()) for s in corrections.segments.values()],
        fits=[
            fit_out(f, payload.get("coefficients", {}).get(f"{f.gpu}|{f.engine}", {}))
            for f in corrections.fits.values()
        ],
        flagged=[FlaggedOut.model_validate(f) for f in payload.get("flagged", [])],
    )


def active_calibration(calibration: Calibration) -> ActiveCalibration:
    return ActiveCalibration(
        calibration.id,
        calibration.model_version,
        Corrections.from_payload(calibration.payload["corrections"]),
    )
