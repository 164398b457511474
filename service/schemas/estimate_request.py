"""The body of POST /v1/estimate (and of each item of the batch endpoint)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    Tag,
    model_validator,
)

from service.schemas.common import example
from service.schemas.gpu_spec import GpuSpecIn

DTypeName = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "mxfp4", "nvfp4"]
Degree = Annotated[StrictInt, Field(ge=1, le=64)]
Tokens = Annotated[StrictInt, Field(ge=1, le=1_000_000)]
Size = Annotated[StrictInt, Field(ge=1, le=10_000_000)]
MetadataKey = Annotated[str, Field(min_length=1, max_length=64)]
# JSON has no NaN or Infinity (Python's parser takes them): refused, not stored as null.
FiniteFloat = Annotated[StrictFloat, Field(allow_inf_nan=False)]
MetadataValue = Annotated[str, Field(max_length=500)] | StrictInt | FiniteFloat | StrictBool | None
WaterPerKwh = Annotated[
    StrictFloat, Field(ge=0.0, le=20.0, description="On-site water usage effectiveness [L/IT kWh].")
]
LifetimeYears = Annotated[
    StrictFloat, Field(gt=0.0, le=20.0, description="Life embodied carbon is spread over [years].")
]
Utilisation = Annotated[
    StrictFloat, Field(gt=0.0, le=1.0, description="Fraction of that life spent serving [-].")
]

EXAMPLE_REQUEST: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "workload": {"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256},
    "hardware": {
        "gpu": "H100-SXM5-80GB",
        "count": 2,
        "parallelism": {"tensor": 2, "expert": 1, "pipeline": 1},
    },
    "precision": {"weights": "bf16", "activations": "bf16", "kv_cache": "bf16"},
    "serving": {"flash_attention": True},
    "datacenter": {"region": "US-CA", "pue": 1.2, "carbon_intensity_g_per_kwh": None},
    "metadata": {"request_id": "gw-123", "customer": "acme"},
}


class WorkloadIn(BaseModel):
    """`batch_size` sequences; the model's context length is checked too.
    `cached_prompt_tokens` (at most `prompt_tokens`) of each prompt are prefix-cache hits:
    their KV cache is held, so they are not recomputed."""

    model_config = example({"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256})

    batch_size: Annotated[StrictInt, Field(ge=1, le=4096)]
    prompt_tokens: Tokens
    output_tokens: Tokens
    cached_prompt_tokens: Annotated[StrictInt, Field(ge=0, le=1_000_000)] = 0


class ParallelismIn(BaseModel):
    """`tensor` x `data` (attention data parallelism) x `pipeline` = count; `expert`, the
    expert-parallel degree of the MoE layers, divides tensor x data. The older form, tensor x
    expert x pipeline = count (no `data`), keeps its meaning: attention over tensor x expert
    GPUs, each expert sharded over `tensor`."""

    model_config = example({"tensor": 2, "expert": 1, "pipeline": 1})

    tensor: Degree = 1
    expert: Degree = 1
    pipeline: Degree = 1
    data: Degree | None = None

    def is_older_form(self, count: int) -> bool:
        """Whether these degrees are the older tensor x expert x pipeline = count form."""
        return self.data is None and self.tensor * self.expert * self.pipeline == count


class HardwareIn(BaseModel):
    """GPU id (or alias) from GET /v1/gpus, or instead `spec`, a GPU described inline (what it
    leaves out is filled from the nearest catalogued GPU, and the quote says so); and how many;
    by default tensor parallelism = count."""

    model_config = example({"gpu": "H100-SXM5-80GB", "count": 2})

    gpu: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    spec: GpuSpecIn | None = None
    count: Degree = 1
    parallelism: ParallelismIn | None = None

    @model_validator(mode="after")
    def _one_gpu(self) -> Self:
        if (self.gpu is None) == (self.spec is None):
            raise ValueError("give either `gpu` (an id from GET /v1/gpus) or `spec`, not both")
        return self

    @model_validator(mode="after")
    def _degrees_multiply_to_count(self) -> Self:
        check_degrees(self.parallelism, self.count, "")
        return self


def check_degrees(par: ParallelismIn | None, count: int, where: str) -> None:
    """Raise ValueError (naming `where`, the object's dotted path, if given) unless `par`'s
    degrees multiply to `count` and `expert` divides tensor x data."""
    if par is None or par.is_older_form(count):
        return
    at = f"{where}." if where else ""
    data = par.data or 1
    if par.tensor * data * par.pipeline != count:
        raise ValueError(
            f"{at}parallelism tensor x data x pipeline = {par.tensor * data * par.pipeline} "
            f"must equal {at}count = {count} (or, without data, tensor x expert x "
            f"pipeline = {par.tensor * par.expert * par.pipeline})"
        )
    if (par.tensor * data) % par.expert != 0:
        raise ValueError(
            f"{at}parallelism.expert = {par.expert} must divide tensor x data = {par.tensor * data}"
        )


class PrecisionIn(BaseModel):
    """Weights default to the model's published precision; the rest to bf16."""

    model_config = example({"weights": "fp8", "activations": "fp8", "kv_cache": "bf16"})

    weights: DTypeName | None = None
    activations: DTypeName | None = None
    kv_cache: DTypeName | None = None


class PrefillWorkerIn(BaseModel):
    """Disaggregated serving's prefill worker: `count` GPUs of the request's GPU type laid
    out as `parallelism` says (same rules as `hardware`; by default tensor = count), computing
    `batch_size` prompts per pass, the request's among them; `workers_per_decode_worker` such
    workers share the prompts of one decode worker (2: two prefill workers per decode worker;
    0.5: one for two), which sets how long a prompt waits for one."""

    model_config = example({"count": 8, "parallelism": {"tensor": 8}, "batch_size": 1})

    count: Degree = 1
    parallelism: ParallelismIn | None = None
    batch_size: Annotated[StrictInt, Field(ge=1, le=4096)] = 1
    workers_per_decode_worker: Annotated[FiniteFloat | StrictInt, Field(gt=0, le=1024)] = 1.0

    @model_validator(mode="after")
    def _degrees_multiply_to_count(self) -> Self:
        check_degrees(self.parallelism, self.count, "serving.disaggregated.prefill")
        return self


class DisaggregatedIn(BaseModel):
    """Prefill and decode on separate workers: `hardware` (and `serving.concurrent_sequences`)
    describe the decode worker, `prefill` the worker that computes the prompt; the prompt's KV
    cache is handed from one to the other."""

    model_config = example({"prefill": {"count": 8, "parallelism": {"tensor": 8}}})

    prefill: PrefillWorkerIn


class ServingIn(BaseModel):
    """How the model is served: fused attention, the engine whose fitted profile applies
    (`vllm`, `sglang`, `trtllm`, and the older vLLM profiles `vllm-v1`: vLLM >= 0.8, the
    default, and `vllm-v0`: vLLM <= 0.6; `hf-transformers`: eager PyTorch, what the project's
    own measurement harness runs) at `engine_version` (a version never measured takes
    the nearest profile and wider intervals, with a warning), and the sequences running
    on the replica while this request runs, its own included (`concurrent_sequences`, at least
    `batch_size`; omitted: a static batch of the request's own sequences alone); with
    `disaggregated`, those run on the decode worker and the prompt on its prefill worker."""

    model_config = example({"flash_attention": True, "engine": "vllm-v1"})

    flash_attention: StrictBool | None = None
    engine: Literal["vllm", "sglang", "trtllm", "vllm-v1", "vllm-v0", "hf-transformers"] | None = (
        None
    )
    engine_version: Annotated[str, Field(min_length=1, max_length=50)] | None = None
    concurrent_sequences: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    disaggregated: DisaggregatedIn | None = None


class DatacenterIn(BaseModel):
    """Where the request runs. `region` is a code from GET /v1/regions (country, grid zone or an
    AWS/GCP/Azure region); an explicit intensity overrides the region's, and each other field
    overrides the default the quote would otherwise take (see the quote's `carbon.factors`)."""

    model_config = example(
        {
            "region": "FR",
            "pue": 1.1,
            "carbon_intensity_g_per_kwh": None,
            "wue_l_per_kwh": 0.2,
            "lifetime_years": 5,
            "utilisation": 0.8,
        }
    )

    region: Annotated[str, Field(min_length=1, max_length=50)] | None = None
    pue: Annotated[StrictFloat, Field(ge=1.0, le=3.0)] | None = None
    carbon_intensity_g_per_kwh: Annotated[StrictFloat, Field(ge=0.0, le=2000.0)] | None = None
    wue_l_per_kwh: WaterPerKwh | None = None
    lifetime_years: LifetimeYears | None = None
    utilisation: Utilisation | None = None


class ArchitectureIn(BaseModel):
    """A custom decoder-only transformer (Hugging Face config names)."""

    model_config = example(
        {
            "hidden_size": 4096,
            "num_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "intermediate_size": 14336,
            "vocab_size": 128256,
            "max_context_tokens": 131072,
        }
    )

    hidden_size: Size
    num_layers: Annotated[StrictInt, Field(ge=1, le=1000)]
    num_attention_heads: Annotated[StrictInt, Field(ge=1, le=1024)]
    num_key_value_heads: Annotated[StrictInt, Field(ge=1, le=1024)] | None = None
    head_dim: Annotated[StrictInt, Field(ge=1, le=4096)] | None = None
    intermediate_size: Size
    vocab_size: Size
    max_context_tokens: Annotated[StrictInt, Field(ge=1, le=10_000_000)] | None = None
    mlp: Literal["gated", "plain"] | None = None
    activation: Literal["silu", "gelu", "relu"] | None = None
    num_experts: Annotated[StrictInt, Field(ge=0, le=1024)] = 0
    experts_per_token: Annotated[StrictInt, Field(ge=0, le=1024)] = 0
    moe_intermediate_size: Size | None = None
    num_moe_layers: Annotated[StrictInt, Field(ge=0, le=1000)] | None = None


class HfConfigIn(BaseModel):
    """A model's Hugging Face `config.json` as published, recognised by its `model_type` and
    read the way that model's transformers config class reads it (its defaults for absent
    keys, the `text_config` of a multimodal model); keys it does not read are ignored."""

    model_config = ConfigDict(
        extra="allow",
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    "model_type": "qwen3_moe",
                    "hidden_size": 2048,
                    "num_hidden_layers": 48,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 4,
                    "head_dim": 128,
                    "intermediate_size": 6144,
                    "moe_intermediate_size": 768,
                    "num_experts": 128,
                    "num_experts_per_tok": 8,
                    "vocab_size": 151936,
                    "max_position_embeddings": 40960,
                    "torch_dtype": "bfloat16",
                }
            ]
        },
    )

    model_type: Annotated[str, Field(min_length=1, max_length=100)]


# Tags of the two forms of `architecture`: pydantic puts the tag in an error's loc, which the
# problem handler drops (it names no place in the body).
ARCHITECTURE_FORMS = ("custom", "config")


def _architecture_form(value: Any) -> str:
    """`config` for a config.json (it has a `model_type`), `custom` otherwise."""
    if isinstance(value, HfConfigIn) or (isinstance(value, dict) and "model_type" in value):
        return "config"
    return "custom"


ArchitectureForm = Annotated[
    Annotated[ArchitectureIn, Tag("custom")] | Annotated[HfConfigIn, Tag("config")],
    Discriminator(_architecture_form),
]


class EstimateRequest(BaseModel):
    """What to price: a catalogue `model` or an `architecture` (the custom form or a
    config.json), the workload and GPUs."""

    model_config = example(EXAMPLE_REQUEST)

    model: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    architecture: ArchitectureForm | None = None
    workload: WorkloadIn
    hardware: HardwareIn
    precision: PrecisionIn | None = None
    serving: ServingIn | None = None
    datacenter: DatacenterIn | None = None
    metadata: Annotated[dict[MetadataKey, MetadataValue], Field(max_length=32)] | None = None

    @model_validator(mode="after")
    def _model_or_architecture(self) -> Self:
        if (self.model is None) == (self.architecture is None):
            raise ValueError("give exactly one of `model` (a catalogue id) or `architecture`")
        return self
