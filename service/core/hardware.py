"""The GPU figures the roofline and power model need (a view of one GPU catalogue entry)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.core.cost_model_errors import UnsupportedPrecision
from service.core.dtypes import CUDA_CORE_FP32


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """Peak rates and power of one GPU.

    Attributes:
        id: catalogue id, e.g. ``H100-SXM5-80GB``.
        tensor_dense_flops_per_s: dense tensor-core peak [FLOP/s] per precision key
            (``tf32``, ``bf16``, ``fp16``, ``fp8``, ``int8``, ``int4``, ``fp4``).
        cuda_core_fp32_flops_per_s: FP32 vector (non-tensor) peak [FLOP/s].
        special_function_ops_per_s: transcendental (exp, rsqrt) throughput [op/s].
        memory_bytes: device memory [B].
        memory_bandwidth_bytes_per_s: device memory bandwidth [B/s].
        interconnect_bandwidth_bytes_per_s: GPU-to-GPU bandwidth per direction [B/s] within one
            interconnect domain (NVLink / Infinity Fabric / the server's PCIe).
        interconnect_domain_gpus: GPUs one interconnect domain joins (8 for an HGX baseboard,
            72 for an NVL72 rack).
        scale_out_bandwidth_bytes_per_s: per-GPU network bandwidth per direction between
            domains [B/s] (the GPU's share of the node's NICs).
        tdp_w: board power limit [W].
        idle_w: power drawn while allocated but idle [W].
    """

    id: str
    tensor_dense_flops_per_s: Mapping[str, float]
    cuda_core_fp32_flops_per_s: float
    special_function_ops_per_s: float
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float
    interconnect_bandwidth_bytes_per_s: float
    tdp_w: float
    idle_w: float
    interconnect_domain_gpus: int
    scale_out_bandwidth_bytes_per_s: float

    def __hash__(self) -> int:
        # The peaks mapping is read-only but not hashable itself; hash its items.
        return hash((self.id, tuple(sorted(self.tensor_dense_flops_per_s.items())), self.tdp_w))

    def gemm_peak_flops_per_s(self, compute_key: str) -> float:
        """Dense peak [FLOP/s] for GEMMs running at `compute_key` (see dtypes.gemm_compute_key)."""
        if compute_key == CUDA_CORE_FP32:
            return self.cuda_core_fp32_flops_per_s
        peak = self.tensor_dense_flops_per_s.get(compute_key)
        if peak is None:
            supported = ", ".join(sorted(self.tensor_dense_flops_per_s)) or "none"
            raise UnsupportedPrecision(
                f"{self.id} has no {compute_key} tensor cores (it has: {supported}); "
                "choose a precision this GPU runs",
                field="precision",
            )
        return peak

    def collective_bandwidth_bytes_per_s(self, group: int) -> float:
        """Per-GPU link bandwidth per direction [B/s] of a collective over `group` GPUs: the
        interconnect within one domain; a group wider than the domain spans several, and a ring
        through them runs at the network's rate between domains (its slowest hop)."""
        if group <= self.interconnect_domain_gpus:
            return self.interconnect_bandwidth_bytes_per_s
        return min(self.scale_out_bandwidth_bytes_per_s, self.interconnect_bandwidth_bytes_per_s)

    def pipeline_hop_bandwidth_bytes_per_s(self, stage_gpus: int, stages: int) -> float:
        """Per-GPU bandwidth per direction [B/s] of one pipeline hand-off, averaged over the
        `stages` - 1 hops of a pass (a harmonic mean: their times add). Stages of `stage_gpus`
        GPUs sit one after another on consecutive GPUs, rank j of a stage sending to rank j of
        the next; a hop between different interconnect domains runs at the network's rate."""
        if stages <= 1:
            return self.interconnect_bandwidth_bytes_per_s
        domain = self.interconnect_domain_gpus
        network = self.collective_bandwidth_bytes_per_s(domain + 1)
        seconds_per_byte = 0.0
        for stage in range(stages - 1):
            first = stage * stage_gpus
            crosses = any(
                (first + j) // domain != (first + j + stage_gpus) // domain
                for j in range(stage_gpus)
            )
            rate = network if crosses else self.interconnect_bandwidth_bytes_per_s
            seconds_per_byte += 1.0 / rate
        return (stages - 1) / seconds_per_byte

    def ridge_point_flops_per_byte(self, compute_key: str) -> float:
        """Arithmetic intensity [FLOP/B] above which a GEMM at `compute_key` is compute-bound."""
        return self.gemm_peak_flops_per_s(compute_key) / self.memory_bandwidth_bytes_per_s
