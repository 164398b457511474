"""The answer of POST /v1/estimate (and each priced item of a batch)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from llm_energy_quotes_client.models.base import Document


class Energy(Document):
    """GPU energy of the whole request [J]; `gpu_j_low`/`gpu_j_high` bound it by the
    `interval_lower_quantile`..`interval_upper_quantile` of held-out measured/predicted ratios."""

    gpu_j: float
    gpu_j_low: float
    gpu_j_high: float
    per_sequence_gpu_j: float
    server_overhead_j: float = 0.0
    facility_j: float
    prefill_gpu_j: float
    decode_gpu_j: float
    interval_lower_quantile: float
    interval_upper_quantile: float
    calibration_factor: float = 1.0


class Latency(Document):
    """Time of the whole request [s]; `time_per_output_token_s` is the mean decode step."""

    prefill_s: float
    decode_s: float
    time_per_output_token_s: float
    total_s: float


class CarbonFactor(Document):
    """One factor the quote was priced with: value, 10th-90th percentile band, unit, source."""

    value: float
    low: float
    high: float
    unit: str
    defaulted: bool
    source: str


class Carbon(Document):
    """CO2e [g] and water [L] of the whole request; `total_g = operational_g + embodied_g`."""

    operational_g: float
    embodied_g: float
    total_g: float
    total_g_low: float
    total_g_high: float
    carbon_intensity_g_per_kwh: float
    pue: float
    region: str | None = None
    carbon_intensity_source: str = ""
    water_l: float = 0.0
    factors: dict[str, CarbonFactor] = Field(default_factory=dict)


class KernelRow(Document):
    """One kernel over a whole phase (`?verbose=true`), or a row beyond the kernels (`kind`
    `host_overhead`, `correction`, and in disaggregated serving `kv_transfer`: the prompt's KV
    cache handed to the decode worker, bound `network`, its link in `kernel`). Time [s], GPU
    energy [J], bytes moved over NVLink or the network [bytes]."""

    phase: str
    kernel: str
    kind: str
    bound: str
    time_s: float
    gpu_j: float
    network_bytes: float


class Breakdown(Document):
    """The per-kernel table and the inputs that were defaulted (`?verbose=true`)."""

    kernels: list[KernelRow]
    defaulted_inputs: dict[str, Any]


class Estimate(Document):
    """A quote. `quote_id` is None when the service could not store it (database away): the
    figures hold, but nothing can be observed or billed against it."""

    quote_id: str | None
    created_at: datetime
    model_version: str
    calibration_id: str | None = None
    model: str
    gpu: str
    gpu_count: int
    energy: Energy
    latency: Latency
    carbon: Carbon
    breakdown: Breakdown | None = None
    warnings: list[str] = Field(default_factory=list)
