"""Turn an EstimateRequest into the core's inputs, recording every input that was defaulted."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from service.catalog.engine_versions import EngineChoice, choose_profile
from service.catalog.engines import DEFAULT_ENGINE, load_engine_versions, unfused_norms
from service.catalog.facilities import FacilityCatalog, load_facility_catalog
from service.catalog.gpu_spec import gpu_from_spec
from service.catalog.gpus import GpuCatalog, GpuRecord, UnknownGpu
from service.catalog.hf_config import read_config
from service.catalog.models import ModelCatalog, UnknownModel
from service.catalog.prefill_budget import prefill_budget_tokens
from service.catalog.regions import RegionCatalog, RegionRecord, UnknownRegion
from service.catalog.registered import RegisteredArchitecture
from service.catalog.servers import ServerCatalog, load_server_catalog
from service.catalog.variants import Variant
from service.core.architecture import ModelArchitecture, default_head_dim
from service.core.disaggregated import PrefillWorker
from service.core.dtypes import DType
from service.core.workload import Deployment, Parallelism, Precision, Workload
from service.errors import FieldError, InvalidRequest, UnknownName
from service.pricing.carbon_accounting import CarbonInputs, resolve_carbon_inputs
from service.schemas.estimate_request import (
    ArchitectureIn,
    EstimateRequest,
    HardwareIn,
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
    prefill_worker: PrefillWorker | None = None  # disaggregated serving's


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


def unknown_gpu(error: UnknownGpu) -> UnknownName:
    """An unknown GPU id's 422: near matches, and the two ways to price it anyway."""
    detail = (
        f"{error}; to price a GPU the catalogue lacks, describe it inline as `hardware.spec` "
        "(peaks per precision, memory size and bandwidth, interconnect, TDP; the rest is filled "
        "from the nearest catalogued GPU), or add it for every tenant with POST /v1/gpus "
        "(operator key)"
    )
    return UnknownName(
        detail,
        errors=[FieldError("hardware.gpu", detail)],
        extra={"suggestions": error.suggestions},
    )


def resolve_gpu(
    hardware: HardwareIn, gpus: GpuCatalog, defaulted: dict[str, Any]
) -> tuple[GpuRecord, list[str]]:
    """The GPU `hardware` names (or describes inline in `spec`) and the notes saying what was
    filled in; raises UnknownName for an unknown id."""
    if hardware.spec is not None:
        if gpus.has(hardware.spec.id):
            # a catalogued GPU's name would lend the spec that GPU's evidence and calibration
            detail = (
                f"hardware.spec.id {hardware.spec.id!r} names a catalogued GPU: give it as "
                "`hardware.gpu`, or name the described GPU otherwise"
            )
            raise InvalidRequest(detail, errors=[FieldError("hardware.spec.id", detail)])
        described = gpu_from_spec(gpus, hardware.spec.model_dump())
        if described.filled:
            defaulted["hardware.spec"] = {
                "filled_from": described.filled_from,
                "fields": list(described.filled),
            }
        return described.record, [described.note("hardware.spec")]
    assert hardware.gpu is not None  # guaranteed by HardwareIn's validator
    try:
        gpu = gpus.get(hardware.gpu)
    except UnknownGpu as error:
        raise unknown_gpu(error) from None
    return gpu, [str(note) for note in gpu.raw.get("notes", ())]


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
    gpu, gpu_notes = resolve_gpu(request.hardware, gpus, defaulted)
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
    notes.extend(gpu_notes)
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
        prefill_budget_tokens=prefill_budget_tokens(engine, architecture, gpu.spec),
    )
    prefill_worker = disaggregated_prefill(request, deployment)
    if prefill_worker is not None:
        workload = replace(workload, decode_only=True)
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
        prefill_worker=prefill_worker,
    )


def disaggregated_prefill(request: EstimateRequest, decode: Deployment) -> PrefillWorker | None:
    """The prefill worker of a disaggregated request (None: aggregated serving): the decode
    worker's deployment (`decode`) on the prefill worker's GPUs and layout."""
    split = request.serving.disaggregated if request.serving else None
    if split is None:
        return None
    worker = split.prefill
    parallelism = (
        Parallelism(tensor=worker.count)
        if worker.parallelism is None
        else core_parallelism(worker.parallelism, worker.count)
    )
    return PrefillWorker(
        replace(decode, parallelism=parallelism),
        worker.batch_size,
        float(worker.workers_per_decode_worker),
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
    # The activations follow the weights served, given or published: an fp8 or nvfp4 model
    # runs W8A8 / W4A4 where the GPU has those tensor cores, as engines quantising it do.
    served = DType(given["weights"]) if given.get("weights") is not None else weights
    fallback = {
        "weights": weights,
        "activations": _default_activations(served, gpu, sixteen_bit, given, notes),
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


# Weight formats served with activations of their own format (W8A8 FP8, W4A4 NVFP4) on GPUs
# with tensor cores for it, and weight-only elsewhere. int8 stays weight-only by default
# (GPTQ-Int8, bitsandbytes); W8A8 int8 is `precision.activations: int8`.
_NATIVE_ACTIVATIONS = {DType.FP8: "fp8", DType.NVFP4: "fp4"}


def _default_activations(
    weights: DType, gpu: GpuRecord, sixteen_bit: DType, given: dict[str, Any], notes: list[str]
) -> DType:
    """The activations' precision when the request names none: the weights' own where the GPU
    has tensor cores for it (FP8 on Hopper/Ada/Blackwell, NVFP4 on Blackwell), else 16-bit,
    the weights dequantised in the kernel (said in `notes`)."""
    key = _NATIVE_ACTIVATIONS.get(weights)
    if key is None:
        return sixteen_bit
    if key in gpu.spec.tensor_dense_flops_per_s:
        return weights
    if given.get("activations") is None:
        notes.append(
            f"{gpu.id} has no {key} tensor cores: {weights.value} weights run weight-only, "
            f"dequantised to {sixteen_bit.value} in the GEMM kernels"
        )
    return sixteen_bit


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
