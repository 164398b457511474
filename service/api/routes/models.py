"""A tenant's own models (scope: admin): POST /v1/models registers one from its config.json,
DELETE /v1/models/{id} removes it. Listing is the public catalogue's (routes/catalog.py)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from service.api.deps import AdminCaller, EstimatorDep, SessionDep
from service.api.openapi import problem_responses
from service.api.routes.catalog import ModelId
from service.quotes.model_registry import delete_model, register_model
from service.schemas.catalog import ModelOut
from service.schemas.registered_models import RegisterModelIn

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.post(
    "",
    response_model=ModelOut,
    status_code=201,
    responses=problem_responses(401, 403, 409, 413, 422, 503),
)
def post_model(
    body: RegisterModelIn, caller: AdminCaller, session: SessionDep, estimator: EstimatorDep
) -> ModelOut:
    """Register the tenant's model `id` from its config.json, priced like a catalogue model
    in the tenant's estimates from then on; 409 if the id is taken (a catalogue model's or
    the tenant's), 422 naming the config key that cannot be priced."""
    return ModelOut.model_validate(register_model(session, estimator.models, caller.tenant, body))


@router.delete(
    "/{model_id:path}", status_code=204, responses=problem_responses(401, 403, 404, 422, 503)
)
def remove_model(model_id: ModelId, caller: AdminCaller, session: SessionDep) -> Response:
    """Remove the tenant's registered model (404 when the tenant has none of that id)."""
    delete_model(session, caller.tenant, model_id)
    return Response(status_code=204)
