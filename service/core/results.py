"""What the cost model returns: per-kernel, per-phase and per-request costs."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.core.kernel_table import KernelTable
    from service.core.kv_transfer import KvTransfer


class Phase(StrEnum):
    PREFILL = "prefill"
    DECODE = "decode"


class Bound(StrEnum):
    """The roofline limb that sets a kernel's time."""

    COMPUTE = "compute"
    MEMORY = "memory"
    NETWORK = "network"


@dataclass(frozen=True, slots=True)
class KernelCost:
    """One kernel's cost over a whole phase: all layers it appears in, all decode steps, all GPUs.

    Operation and byte counts are summed over every GPU that runs the kernel; `time_s` is the
    kernel's share of the request's wall-clock timeline; `gpu_j` is the energy of the GPUs
    running it while it runs (idle power included). In a continuous batch the time is the
    whole passes', the counts and energy the request's share of them.
    """

    phase: Phase
    name: str
    kind: str
    executions: int
    tensor_flops: float
    cuda_core_ops: float
    special_function_ops: float
    weight_bytes: float
    activation_read_bytes: float
    activation_write_bytes: float
    kv_cache_read_bytes: float
    kv_cache_write_bytes: float
    network_bytes: float
    time_s: float
    gpu_j: float
    bound: Bound
    compute_precision: str
    arithmetic_intensity_flops_per_byte: float
    ridge_point_flops_per_byte: float

    @property
    def memory_bytes(self) -> float:
        """All bytes moved through device memory [B]."""
        return (
            self.weight_bytes
            + self.activation_read_bytes
            + self.activation_write_bytes
            + self.kv_cache_read_bytes
            + self.kv_cache_write_bytes
        )


@dataclass(frozen=True, slots=True)
class PhaseCost:
    """Prefill or decode as a whole.

    Attributes:
        time_s: wall-clock time of the phase [s], host overheads included.
        gpu_j: energy of all GPUs held during the phase [J], idle power included.
        overhead_s: the host-side part of `time_s` [s] (GPUs idle).
        steps: forward passes in the phase (prefill 1, decode output_tokens - 1), each times
            the waves a batch that does not fit at once runs in.
        table: per-kernel totals as arrays.
    """

    phase: Phase
    time_s: float
    gpu_j: float
    overhead_s: float
    steps: int
    table: KernelTable

    @property
    def kernels(self) -> tuple[KernelCost, ...]:
        """Per-kernel breakdown rows (built on demand)."""
        return self.table.rows()


@dataclass(frozen=True, slots=True)
class MemoryFootprint:
    """Device memory one GPU needs [B], against what it has."""

    weight_bytes_per_gpu: float
    kv_cache_bytes_per_gpu: float
    capacity_bytes_per_gpu: float

    @property
    def required_bytes_per_gpu(self) -> float:
        return self.weight_bytes_per_gpu + self.kv_cache_bytes_per_gpu


@dataclass(frozen=True, slots=True)
class RequestEstimate:
    """The analytical estimate of one request (a static batch, or its share of a continuous
    one).

    Attributes:
        gpu_j: energy of all GPUs for the whole request [J].
        total_s: prefill plus decode wall-clock time [s].
        time_per_output_token_s: mean decode step time [s] (0 when there is no decode step).
        memory: weights and the KV cache held while the request runs, per GPU.
        warnings: approximations the estimate made (e.g. KV heads replicated).
        kv_transfer: disaggregated serving's KV hand-off, part of the prefill phase (None:
            aggregated serving).
    """

    prefill: PhaseCost
    decode: PhaseCost
    gpu_j: float
    total_s: float
    time_per_output_token_s: float
    batch_size: int
    gpu_count: int
    memory: MemoryFootprint
    warnings: tuple[str, ...]
    kv_transfer: KvTransfer | None = None

    @property
    def per_sequence_gpu_j(self) -> float:
        return self.gpu_j / self.batch_size
