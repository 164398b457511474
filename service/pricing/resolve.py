"""Turn an EstimateRequest into the core's inputs, recording every input that was defaulted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.catalog.engine_versions import EngineChoice, choose_profile
from service.catalog.engines import DEFAULT_ENGINE, load_engine_versions, unfused_norms
from service.catalog.facilities import FacilityCatalog, load_facility_catalog
from service.catalog.gpus import GpuCatalog, GpuRecord, UnknownGpu
from service.catalog.hf_config import read_config
from service.catalog.models import ModelCatalog, UnknownModel
from service.catalog.regions import RegionCatalog, RegionRecord, UnknownRegion
from service.catalog.registered import RegisteredArchitecture
from service.catalog.servers import ServerCatalog, load_server_catalog
from service.catalog.variants import Variant
from service.core.architecture import ModelArchitecture, default_head_dim
from service.core.dtypes import DType
from service.core.workload import Deployment, Parallelism, Precision, Workload
from service.errors import FieldError, UnknownName
from service.pricing.carbon_accounting import CarbonInputs, resolve_carbon_inputs
from service.schemas.estimate_request import (
    ArchitectureIn,
    EstimateRequest,
    HfConfigIn,
    ParallelismIn,
)

CUSTOM_MODEL_ID = "custom"


@dataclass(slots=True)
class ResolvedRequest:
    """The core inputs of one request, plus what the caller did not say."""

    model_id: str
    architecture: ModelArchitecture
    gpu: GpuRecord
    workload: Workload
    deployment: Deployment
    carbon: CarbonInputs
    notes: list[str] = field(default_factory=list)
    defaulted: dict[str, Any] = field(default_factory=dict)
    is_custom: bool = False
    engine: str = DEFAULT_ENGINE
    engine_evidence: str = DEFAULT_ENGINE


def unknown_name(loc: str, error: UnknownGpu | UnknownModel | UnknownRegion) -> UnknownName:
    return UnknownName(
        str(error),
        errors=[FieldError(loc, str(error))],
        extra={"suggestions": error.suggestions},
    )


def unknown_model(error: UnknownModel) -> UnknownName:
    """An unknown model id's 422: near matches, and the two ways to price it anyway."""
    detail = (
        f"{error}; to price a model the catalogue lacks, give its config.json as `architecture`, "
        "or register it with POST /v1/models"
    )
    return UnknownName(
        detail, errors=[FieldError("model", detail)], extra={"suggestions": error.suggestions}
    )


def variant_precision(
    requested: str, base_id: str, variant: Variant, published: DType, notes: list[str]
) -> DType:
    """The weights' default precision of a variant of `base_id` (its quantisation suffix's,
    else the base's `published`), with notes naming the model used appended to `notes`."""
    notes.append(
        f"{requested} is not in the catalogue: priced with the architecture of {base_id}, of "
        "which its name makes it a fine-tune, quantisation or dated release"
    )
    notes.extend(variant.notes)
    if variant.weights is None:
        if variant.notes:
            notes.append(f"weights default to {published.value}, {base_id}'s published precision")
        return published
    notes.append(f"weights default to {variant.weights.value}, as the name's suffix says")
    return variant.weights


def resolve_request(
    request: EstimateRequest,
    gpus: GpuCatalog,
    models: ModelCatalog,
    regions: RegionCatalog,
    facilities: FacilityCatalog | None = None,
    servers: ServerCatalog | None = None,
    registered: RegisteredArchitecture | None = None,
) -> ResolvedRequest:
    """Look names up in the catalogues and fill defaults; raises UnknownName or core errors.
    `registered` is the caller's tenant's registered model the request names, if it does."""
    defaulted: dict[str, Any] = {}
    notes: list[str] = []
    try:
        gpu = gpus.get(request.hardware.gpu)
    except UnknownGpu as error:
        raise unknown_name("hardware.gpu", error) from None
    if registered is not None:
        model_id, architecture = registered.id, registered.architecture
        published, notes = registered.published_precision, list(registered.notes)
    elif request.model is not None:
        try:
            record, variant = models.find(request.model)
        except UnknownModel as error:
            raise unknown_model(error) from None
        model_id, architecture = record.id, record.require_architecture()
        published, notes = record.published_precision, list(record.notes)
        if variant is not None:
            published = variant_precision(request.model, record.id, variant, published, notes)
    elif isinstance(request.architecture, HfConfigIn):
        config = read_config(request.architecture.model_dump())
        model_id, published, notes = CUSTOM_MODEL_ID, config.published_precision, list(config.notes)
        architecture = config.architecture
        defaulted.update({f"architecture.{k}": v for k, v in config.defaulted.items()})
    else:
        assert request.architecture is not None  # guaranteed by EstimateRequest's validator
        model_id, published = CUSTOM_MODEL_ID, DType.BF16
        architecture = custom_architecture(request.architecture, defaulted)
    hardware = request.hardware
    if "count" not in hardware.model_fields_set:
        defaulted["hardware.count"] = hardware.count
    if hardware.parallelism is None:
        parallelism = Parallelism(tensor=hardware.count)
        defaulted["hardware.parallelism"] = {"tensor": hardware.count, "expert": 1, "pipeline": 1}
    else:
        parallelism = core_parallelism(hardware.parallelism, hardware.count)
    # Resolved in the order they are reported as defaulted (precision, flash attention, region,
    # datacenter, engine); the engine decides how the norms run.
    precision = _precision(request, published, gpu, defaulted, notes)
    flash_attention = _flash_attention(request, defaulted)
    workload = Workload(
        request.workload.batch_size, request.workload.prompt_tokens, request.workload.output_tokens
    )
    carbon = resolve_carbon_inputs(
        request.datacenter,
        _region(request, regions, defaulted, notes),
        gpu,
        hardware.count,
        facilities or load_facility_catalog(),
        servers or load_server_catalog(),
        defaulted,
    )
    choice = _engine(request, defaulted)
    engine = choice.profile
    if choice.note:
        notes.append(choice.note)
    deployment = Deployment(
        gpu=gpu.spec,
        parallelism=parallelism,
        precision=precision,
        flash_attention=flash_attention,
        unfused_norms=unfused_norms(architecture, engine),
    )
    return ResolvedRequest(
        model_id,
        architecture,
        gpu,
        workload,
        deployment,
        carbon,
        notes,
        defaulted,
        is_custom=request.model is None,
        engine=engine,
        engine_evidence=choice.evidence,
    )


def core_parallelism(par: ParallelismIn, count: int) -> Parallelism:
    """The core's layout of the request's degrees: the older form as it is; tensor x data x
    pipeline = count as a stage of tensor x data GPUs whose experts are spread over `expert`
    groups (each sharded over the rest) and whose attention runs in `data` replicas."""
    if par.is_older_form(count):
        return Parallelism(par.tensor, par.expert, par.pipeline)
    data = par.data or 1
    stage = par.tensor * data
    return Parallelism(stage // par.expert, par.expert, par.pipeline, data)


def custom_architecture(spec: ArchitectureIn, defaulted: dict[str, Any]) -> ModelArchitecture:
    """A ModelArchitecture from the request; head_dim, KV heads etc. defaulted when absent."""
    values: dict[str, Any] = spec.model_dump(exclude_none=True)
    if spec.head_dim is None:
        values["head_dim"] = default_head_dim(spec.hidden_size, spec.num_attention_heads)
        defaulted["architecture.head_dim"] = values["head_dim"]
    if spec.num_key_value_heads is None:
        values["num_key_value_heads"] = spec.num_attention_heads
        defaulted["architecture.num_key_value_heads"] = spec.num_attention_heads
    if spec.num_experts > 0 and spec.num_moe_layers is None:
        values["num_moe_layers"] = spec.num_layers
        defaulted["architecture.num_moe_layers"] = spec.num_layers
    for name in ("max_context_tokens", "mlp", "activation"):
        if name not in values:
            defaulted[f"architecture.{name}"] = ModelArchitecture.__dataclass_fields__[name].default
    return ModelArchitecture(**values)


def _precision(
    request: EstimateRequest,
    published: DType,
    gpu: GpuRecord,
    defaulted: dict[str, Any],
    notes: list[str],
) -> Precision:
    given = request.precision.model_dump() if request.precision else {}
    sixteen_bit = DType.BF16 if "bf16" in gpu.spec.tensor_dense_flops_per_s else DType.FP16
    weights = published
    if published in (DType.FP32, DType.BF16, DType.FP16) and published is not sixteen_bit:
        # Serving engines load 32-bit checkpoints, and bf16 ones on GPUs without bf16, in the
        # 16-bit format the GPU runs (vLLM's dtype="auto").
        weights = sixteen_bit
        if given.get("weights") is None:
            notes.append(
                f"weights published in {published.value} are served in {sixteen_bit.value} on "
                f"{gpu.id}"
            )
    # Published FP8 checkpoints run W8A8 on GPUs with fp8 tensor cores, weight-only elsewhere.
    fp8_native = weights is DType.FP8 and "fp8" in gpu.spec.tensor_dense_flops_per_s
    fallback = {
        "weights": weights,
        "activations": DType.FP8 if fp8_native else sixteen_bit,
        "kv_cache": sixteen_bit,
    }
    chosen: dict[str, DType] = {}
    for name, default in fallback.items():
        value = given.get(name)
        if value is None:
            defaulted[f"precision.{name}"] = default.value
            chosen[name] = default
        else:
            chosen[name] = DType(value)
    return Precision(**chosen)


def _engine(request: EstimateRequest, defaulted: dict[str, Any]) -> EngineChoice:
    """The profile of the request's engine and version (a version alone names a vLLM one)."""
    serving = request.serving
    version = serving.engine_version if serving is not None else None
    if serving is None or serving.engine is None:
        if version is None:
            defaulted["serving.engine"] = DEFAULT_ENGINE
            return EngineChoice(DEFAULT_ENGINE, DEFAULT_ENGINE)
        defaulted["serving.engine"] = "vllm"
        return choose_profile("vllm", version, load_engine_versions())
    return choose_profile(serving.engine, version, load_engine_versions())


def _flash_attention(request: EstimateRequest, defaulted: dict[str, Any]) -> bool:
    if request.serving is None or request.serving.flash_attention is None:
        defaulted["serving.flash_attention"] = True
        return True
    return request.serving.flash_attention


def _region(
    request: EstimateRequest, regions: RegionCatalog, defaulted: dict[str, Any], notes: list[str]
) -> RegionRecord | None:
    """The request's region; the default (world) one when it names neither a region nor an
    intensity; None when it gives an intensity but no region."""
    datacenter = request.datacenter
    if datacenter and datacenter.region is not None:
        try:
            return regions.get(datacenter.region)
        except UnknownRegion as error:
            raise unknown_name("datacenter.region", error) from None
    if datacenter and datacenter.carbon_intensity_g_per_kwh is not None:
        return None
    region = regions.default
    defaulted["datacenter.region"] = region.code
    notes.append(
        f"no datacenter region or carbon intensity given: used the {region.name} "
        f"({region.carbon_intensity_g_per_kwh:g} gCO2e/kWh, {region.year}) and industry-average "
        "PUE and water figures"
    )
    return region
