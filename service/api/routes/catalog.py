"""Public catalogues: GPUs, models and grid regions (no key needed)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from service.api.deps import EstimatorDep, OptionalCaller, ServicesDep, SessionDep, public_route
from service.api.openapi import problem_responses
from service.catalog.gpus import GpuRecord, UnknownGpu
from service.catalog.models import ModelRecord, UnknownModel
from service.errors import NotFound
from service.pricing.estimator import Estimator
from service.pricing.evidence import gpu_validation
from service.quotes.gpu_registry import registered_gpu, registered_gpus
from service.quotes.model_registry import tenant_model, tenant_models
from service.schemas.catalog import GpuList, GpuOut, ModelList, ModelOut, RegionList, RegionOut

# Catalogue ids: Hugging Face repo ids (`org/name`), GPU ids and aliases.
ModelId = Annotated[str, Path(max_length=200, pattern=r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)?$")]
GpuId = Annotated[str, Path(max_length=100, pattern=r"^[A-Za-z0-9._ -]+$")]

router = APIRouter(prefix="/v1", tags=["catalogues"], dependencies=[Depends(public_route)])
# The model routes take a key if one is sent (to add its tenant's models), and answer without.
KEY_OPTIONAL: dict[str, Any] = {"security": [{}, {"HTTPBearer": []}]}


def gpu_out(record: GpuRecord, estimator: Estimator) -> GpuOut:
    vendor = str(record.raw.get("vendor", ""))
    validation = gpu_validation(record.id, vendor, estimator.intervals)
    return GpuOut.model_validate({**record.raw, "validation": validation})


def _model(record: ModelRecord) -> ModelOut:
    return ModelOut.model_validate(dict(record.raw))


@router.get("/gpus", response_model=GpuList, responses=problem_responses())
def list_gpus(services: ServicesDep) -> GpuList:
    """Every GPU with its peak rates, memory, power, embodied carbon and sources; after the
    catalogue's, the GPUs added with POST /v1/gpus (`registered: true`)."""
    estimator = services.estimator
    catalog = estimator.gpus
    registered, warnings = registered_gpus(services.database, catalog)
    catalogued = [r for r in catalog.records if not r.raw.get("registered")]
    return GpuList(
        version=catalog.version,
        items=[gpu_out(r, estimator) for r in catalogued + registered],
        warnings=warnings,
    )


@router.get("/gpus/{gpu_id}", response_model=GpuOut, responses=problem_responses(404, 422, 503))
def get_gpu(gpu_id: GpuId, estimator: EstimatorDep, session: SessionDep) -> GpuOut:
    """A GPU by id or alias, the catalogue's or one added with POST /v1/gpus."""
    try:
        return gpu_out(estimator.gpus.get(gpu_id), estimator)
    except UnknownGpu as error:
        registered = registered_gpu(session, estimator.gpus, gpu_id)
        if registered is not None:
            return gpu_out(registered, estimator)
        raise NotFound(str(error), extra={"suggestions": error.suggestions}) from None


@router.get(
    "/models",
    response_model=ModelList,
    responses=problem_responses(),
    openapi_extra=KEY_OPTIONAL,
)
def list_models(services: ServicesDep, caller: OptionalCaller) -> ModelList:
    """Every catalogue model, supported or not, with its architecture and sources; after
    them, with a key, the models its tenant registered (`registered: true`)."""
    catalog = services.estimator.models
    items = [_model(r) for r in catalog.records]
    if caller is None:
        return ModelList(version=catalog.version, items=items)
    registered, warnings = tenant_models(services.database, caller.tenant)
    items += [ModelOut.model_validate(model) for model in registered]
    return ModelList(version=catalog.version, items=items, warnings=warnings)


@router.get(
    "/models/{model_id:path}",
    response_model=ModelOut,
    responses=problem_responses(404, 422, 503),
    openapi_extra=KEY_OPTIONAL,
)
def get_model(
    model_id: ModelId, estimator: EstimatorDep, caller: OptionalCaller, session: SessionDep
) -> ModelOut:
    """A model by Hugging Face repo id (which contains a slash) or alias, or one of the
    caller's tenant's registered models (404 to every other tenant)."""
    try:
        return _model(estimator.models.get(model_id))
    except UnknownModel as error:
        registered = tenant_model(session, caller.tenant, model_id) if caller else None
        if registered is not None:
            return ModelOut.model_validate(registered)
        raise NotFound(str(error), extra={"suggestions": error.suggestions}) from None


@router.get("/regions", response_model=RegionList, responses=problem_responses())
def list_regions(estimator: EstimatorDep) -> RegionList:
    """Grid carbon intensities by region, each with its year and source."""
    catalog = estimator.regions
    return RegionList(
        version=catalog.version,
        default_region=catalog.default.code,
        notes=catalog.notes,
        items=[
            RegionOut(
                code=r.code,
                name=r.name,
                year=r.year,
                carbon_intensity_g_per_kwh=r.carbon_intensity_g_per_kwh,
                source=r.source,
            )
            for r in catalog.records
        ],
    )
