"""Tenants' registered models: registration, listing and removal (POST, GET, DELETE
/v1/models), and the lookup that lets an estimate name one like a catalogue model.

A registered model is its tenant's alone: every query is scoped to the tenant, and another
tenant's model is missing (404), not forbidden. Its config.json is stored as posted and read
again each time it is priced, by the same readers as an estimate's `architecture`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.catalog.models import ModelCatalog, UnknownModel
from service.catalog.registered import (
    REGISTERED_FAMILY,
    RegisteredArchitecture,
    registered_architecture,
)
from service.core.cost_model_errors import CostModelError
from service.db.engine import Database
from service.db.model_registry import RegisteredModelRepository
from service.db.tables import RegisteredModel
from service.errors import (
    Conflict,
    DatabaseUnavailable,
    FieldError,
    InvalidRequest,
    NotFound,
    ServiceError,
)
from service.schemas.estimate_request import EstimateRequest
from service.schemas.registered_models import RegisterModelIn


def register_model(
    session: Session, catalog: ModelCatalog, tenant: str, body: RegisterModelIn
) -> dict[str, Any]:
    """Store `body` as `tenant`'s model; its description. Conflict (409) when the id is a
    catalogue model's or already the tenant's; InvalidRequest (422) naming the config key
    that cannot be priced."""
    try:
        catalog.get(body.id)
        raise Conflict(f"{body.id} is a catalogue model; register the model under another id")
    except UnknownModel:
        pass
    repository = RegisteredModelRepository(session)
    if repository.get(tenant, body.id) is not None:
        raise Conflict(f"{body.id} is registered already; DELETE it first to replace it")
    config = body.config.model_dump()
    try:
        registered = registered_architecture(body.id, config, body.weights)
    except CostModelError as error:
        loc = "weights" if error.field == "weights" else f"config.{error.field or 'model_type'}"
        raise InvalidRequest(error.message, errors=[FieldError(loc, error.message)]) from None
    repository.add(
        RegisteredModel(
            tenant=tenant,
            model_id=body.id,
            model_type=registered.model_type,
            config=config,
            weights=body.weights,
        )
    )
    return registered.description(config)


UNLISTED_WARNING = "the database is unavailable: the tenant's registered models are not listed"


def tenant_models(database: Database, tenant: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The descriptions of `tenant`'s models, by id, and warnings: with the database away,
    none and a warning saying so (the public catalogue still answers)."""
    try:
        with database.sessions() as session:
            rows = RegisteredModelRepository(session).all(tenant)
            return [_description(row) for row in rows], []
    except SQLAlchemyError:
        return [], [UNLISTED_WARNING]


def tenant_model(session: Session, tenant: str, model_id: str) -> dict[str, Any] | None:
    """The description of `tenant`'s model `model_id`, or None."""
    row = RegisteredModelRepository(session).get(tenant, model_id)
    return None if row is None else _description(row)


def delete_model(session: Session, tenant: str, model_id: str) -> None:
    """Remove `tenant`'s model `model_id`; NotFound (404) when it has none of that id."""
    if not RegisteredModelRepository(session).delete(tenant, model_id):
        raise NotFound(f"no registered model {model_id!r}")


Registered = RegisteredArchitecture | ServiceError | None
"""What an estimate's model is among its tenant's models: the model, why it cannot be priced,
or None (not registered: the catalogue and its variants answer)."""


def registered_for(
    database: Database, catalog: ModelCatalog, tenant: str, requests: Sequence[EstimateRequest]
) -> list[Registered]:
    """Each request's registered model, looked up only for names the catalogue does not hold
    (a catalogue entry wins over a registered model, a registered model over a variant)."""
    names = {r.model for r in requests if r.model is not None and not catalog.has(r.model)}
    if not names:
        return [None] * len(requests)
    try:
        with database.sessions() as session:
            rows = RegisteredModelRepository(session).named(tenant, names)
    except SQLAlchemyError:
        retry_after_s = database.settings.retry_after_s
        return [
            _away(catalog, r.model, retry_after_s) if r.model in names else None for r in requests
        ]
    found = {row.model_id.lower(): row for row in rows}
    answers: list[Registered] = []
    for request in requests:
        row = found.get((request.model or "").lower())
        answers.append(None if row is None else _priceable(row))
    return answers


def _away(catalog: ModelCatalog, name: str | None, retry_after_s: float) -> Registered:
    """With the database away: a name a catalogue variant answers is priced as that (None);
    any other may be a registered model, which cannot be read now (503)."""
    try:
        catalog.find(name or "")
    except UnknownModel:
        return DatabaseUnavailable(
            "the database holding registered models is unavailable; retry later",
            headers={"Retry-After": str(round(retry_after_s))},
        )
    return None


def _priceable(row: RegisteredModel) -> RegisteredArchitecture | ServiceError:
    try:
        return registered_architecture(row.model_id, row.config, row.weights)
    except CostModelError as error:  # registered under readers that have changed since
        return InvalidRequest(
            f"registered model {row.model_id}: {error.message}",
            errors=[FieldError("model", error.message)],
        )


def _description(row: RegisteredModel) -> dict[str, Any]:
    try:
        return registered_architecture(row.model_id, row.config, row.weights).description(
            row.config
        )
    except CostModelError as error:
        return {
            "id": row.model_id,
            "family": REGISTERED_FAMILY,
            "model_type": row.model_type,
            "registered": True,
            "supported": False,
            "unsupported_reason": error.message,
            "published_precision": row.weights,
            "architecture": None,
            "config": row.config,
        }
