"""Request bodies as TypedDicts: what a caller may send, checked by mypy, sent as given (the
service validates; a plain dict works the same). Field names and units as in the contract."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "mxfp4", "nvfp4"]


class Workload(TypedDict):
    batch_size: int
    prompt_tokens: int
    output_tokens: int
    cached_prompt_tokens: NotRequired[int]


class Parallelism(TypedDict, total=False):
    tensor: int
    data: int
    expert: int
    pipeline: int


class Hardware(TypedDict):
    gpu: str
    count: NotRequired[int]
    parallelism: NotRequired[Parallelism]


class PrecisionSettings(TypedDict, total=False):
    weights: Precision
    activations: Precision
    kv_cache: Precision


class PrefillWorker(TypedDict, total=False):
    """Disaggregated serving's prefill worker, of the request's GPU type: `count` GPUs (1-64,
    default 1) laid out as `parallelism` says (the rules of `hardware`; by default tensor =
    count), `batch_size` prompts per prefill pass (default 1, the request's among them), and
    `workers_per_decode_worker` [-] such workers sharing one decode worker's prompts (default
    1; 2: two per decode worker, 0.5: one for two; sets how long a prompt waits for one)."""

    count: int
    parallelism: Parallelism
    batch_size: int
    workers_per_decode_worker: float


class Disaggregated(TypedDict):
    """Prefill and decode on separate workers: `hardware` and `serving.concurrent_sequences`
    describe the decode worker, `prefill` the worker that computes the prompt (its KV cache
    is then handed to the decode worker)."""

    prefill: PrefillWorker


class Serving(TypedDict, total=False):
    """How the model is served; `disaggregated` (omitted: prefill and decode share the
    request's GPUs) puts the prompt on a separate prefill worker."""

    flash_attention: bool
    engine: str
    engine_version: str
    concurrent_sequences: int
    disaggregated: Disaggregated


class Datacenter(TypedDict, total=False):
    region: str
    pue: float
    carbon_intensity_g_per_kwh: float | None
    wue_l_per_kwh: float
    lifetime_years: float
    utilisation: float


class EstimateRequest(TypedDict):
    """One request to price: a catalogue `model` (a Hugging Face repo id) or an `architecture`,
    the workload and the GPUs; the rest is defaulted by the service."""

    workload: Workload
    hardware: Hardware
    model: NotRequired[str]
    architecture: NotRequired[dict[str, Any]]
    precision: NotRequired[PrecisionSettings]
    serving: NotRequired[Serving]
    datacenter: NotRequired[Datacenter]
    metadata: NotRequired[dict[str, str | int | float | bool | None]]


class ObservationRequest(TypedDict):
    """What was measured when a quoted request ran: GPU energy [J], wall time [s], with what,
    and when (an RFC 3339 date-time with its offset)."""

    gpu_j: float
    measured_with: str
    measured_at: str
    total_s: NotRequired[float]


class CalibrationRequest(TypedDict, total=False):
    """How to fit a calibration; every field has a service default."""

    scope: Literal["tenant", "global"]
    activate: bool
    shrinkage_k: float
    holdout_fraction: float
    max_ratio: float
    outlier_z: float
