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


class Serving(TypedDict, total=False):
    flash_attention: bool
    engine: str
    engine_version: str
    concurrent_sequences: int


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
