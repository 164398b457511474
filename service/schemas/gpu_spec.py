"""A GPU described by its figures: inline in an estimate (`hardware.spec`) or registered for
every tenant (POST /v1/gpus). Field names are the catalogue's (GET /v1/gpus); what is left
out is filled from the nearest catalogued GPU (service/catalog/gpu_spec.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field, StrictFloat, StrictInt

from service.schemas.common import example

TensorKey = Literal["tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
# Bounds: a typo of three orders of magnitude is refused, every real card passes.
# StrictFloat takes JSON integers too; a strings-as-numbers body is refused.
FlopsPerS = Annotated[StrictFloat, Field(gt=1e11, lt=1e18, allow_inf_nan=False)]
BytesPerS = Annotated[StrictFloat, Field(gt=1e8, lt=1e14, allow_inf_nan=False)]
GPU_ID_PATTERN = r"^[A-Za-z0-9._-]+$"


def _whole_number(value: object) -> object:
    """128.0 is the integer 128 in JSON (and its schema); 128.5 and "128" stay refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# The bounds before the validator: so they are the integer's own and the schema states them.
DomainGpus = Annotated[StrictInt, Field(ge=1, le=1024), BeforeValidator(_whole_number)]

SPEC_EXAMPLE = {
    "id": "acme-accel-2",
    "vendor": "NVIDIA",
    "architecture": "Hopper",
    "tensor_dense_flops_per_s": {"bf16": 6.0e14, "fp8": 1.2e15},
    "memory_bytes": 1.44e11,
    "memory_bandwidth_bytes_per_s": 4.0e12,
    "tdp_w": 600,
}


class GpuSpecIn(BaseModel):
    """A GPU's figures. `vendor` and `architecture` (generation, as in GET /v1/gpus) pick the
    catalogued GPUs the rest is filled from; the nearest of them by the figures given is used.
    `tensor_dense_flops_per_s` lists the precisions the GPU runs (dense peaks, FLOP/s); given,
    it is taken whole."""

    model_config = example(SPEC_EXAMPLE)

    id: Annotated[str, Field(min_length=1, max_length=100, pattern=GPU_ID_PATTERN)] = "custom-gpu"
    vendor: Annotated[str, Field(min_length=1, max_length=50)] | None = None
    architecture: Annotated[str, Field(min_length=1, max_length=50)] | None = None
    tensor_dense_flops_per_s: Annotated[dict[TensorKey, FlopsPerS], Field(min_length=1)] | None = (
        None
    )
    cuda_core_fp32_flops_per_s: FlopsPerS | None = None
    memory_bytes: Annotated[StrictFloat, Field(gt=1e9, lt=1e13, allow_inf_nan=False)] | None = None
    memory_bandwidth_bytes_per_s: BytesPerS | None = None
    interconnect_bandwidth_bytes_per_s: BytesPerS | None = None
    interconnect_domain_gpus: DomainGpus | None = None
    scale_out_bandwidth_bytes_per_s: BytesPerS | None = None
    tdp_w: Annotated[StrictFloat, Field(gt=1, lt=10_000, allow_inf_nan=False)] | None = None
    idle_w: Annotated[StrictFloat, Field(gt=0, lt=5_000, allow_inf_nan=False)] | None = None
    embodied_kg_co2e: Annotated[StrictFloat, Field(ge=0, lt=10_000, allow_inf_nan=False)] | None = (
        None
    )


class RegisterGpuIn(GpuSpecIn):
    """A GPU added to the catalogue for every tenant (operator key): `id` names it in
    estimates; `sources` gives the public source of each figure given (by field name)."""

    model_config = example(
        {**SPEC_EXAMPLE, "sources": {"tdp_w": "Acme Accel 2 datasheet - https://example.com"}}
    )

    id: Annotated[str, Field(min_length=1, max_length=100, pattern=GPU_ID_PATTERN)]
    sources: dict[
        Annotated[str, Field(max_length=100)], Annotated[str, Field(max_length=1000)]
    ] = {}
