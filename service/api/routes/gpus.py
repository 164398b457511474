"""GPUs added for every tenant (operator key): POST /v1/gpus registers one from its figures.
Listing is the public catalogue's (routes/catalog.py)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import AdminCaller, EstimatorDep, SessionDep
from service.api.keys import OPERATOR_SCOPE
from service.api.openapi import problem_responses
from service.api.routes.catalog import gpu_out
from service.quotes.gpu_registry import register_gpu
from service.quotes.recalibration import require_operator
from service.schemas.catalog import GpuOut
from service.schemas.gpu_spec import RegisterGpuIn

router = APIRouter(prefix="/v1/gpus", tags=["catalogues"])


@router.post(
    "",
    response_model=GpuOut,
    status_code=201,
    responses=problem_responses(401, 403, 409, 413, 422, 503),
)
def post_gpu(
    body: RegisterGpuIn, caller: AdminCaller, session: SessionDep, estimator: EstimatorDep
) -> GpuOut:
    """Add the GPU `id` for every tenant from its figures (what they leave out is filled from
    the nearest catalogued GPU of the same vendor and architecture, and said so); it changes
    every tenant's catalogue, so it takes an operator key (403 otherwise); 409 if the id is
    taken."""
    require_operator(caller.allows(OPERATOR_SCOPE), "adding a GPU to the catalogue")
    record = register_gpu(session, estimator.gpus, body)
    return gpu_out(record, estimator)
