"""Achievable-fraction efficiencies, overheads and power coefficients of the cost model.

The values the service uses are fitted on public measurements by
``python -m offline.fitting.fit_cost_model`` and stored with their provenance in
``service/catalog/data/cost_model_coefficients.json``; this module only defines their shape.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RooflineCoefficients:
    """How close kernels get to the GPU's peaks, and the fixed costs the roofline misses.

    Attributes:
        tensor_efficiency: achieved fraction of the dense tensor-core peak on large GEMMs.
        cuda_core_efficiency: achieved fraction of the FP32 vector peak.
        special_function_efficiency: achieved fraction of the transcendental-unit peak.
        memory_efficiency: achieved fraction of the memory bandwidth on streaming kernels
            (GEMM weight reads, attention over the KV cache).
        elementwise_memory_efficiency: the same for elementwise and gather kernels (norms,
            RoPE, residual adds, activations, softmax, embedding lookups), which reach less.
        network_efficiency: achieved fraction of the interconnect bandwidth in collectives.
        kernel_launch_s: fixed time per kernel execution [s] (launch, tail, small-kernel ramp).
        decode_kernel_launch_s: the same in decode [s]; engines that replay decode steps as
            CUDA graphs pay much less than a launch per kernel.
        collective_step_latency_s: latency per ring step of a collective [s].
        prefill_overhead_s: host-side time per prefill [s] (scheduling, input preparation).
        decode_step_overhead_s: host-side time per decode step [s] (scheduler, sampling glue).
        decode_overhead_per_sequence_s: host-side time per decode step per running sequence [s]
            (per-sequence scheduling and metadata work grows with the batch).
        decode_overhead_per_worker_s: host-side time per decode step per GPU worker beyond
            the first [s]: the driver hands each step's inputs to every worker process (vLLM V0
            broadcasts them), and the GPUs wait meanwhile, drawing idle power.
        gemm_tile_m: tile height in M that GEMMs are padded to for their compute time [rows].
        expert_imbalance_per_doubling: growth of the most loaded expert-parallel rank's
            routed rows over the mean per doubling of the expert-parallel degree [-]
            (`moe.expert_load_imbalance`).
        ttft_wave_share: share of a continuous-batch request's arrivals that come with a wave
            of the server's other sequences (a closed-loop client restarting its sequences
            together) and wait for the prompts of that wave queued ahead in the token budget
            [-] (`steady_state.PassMix.wave_passes`); 0: arrivals spread evenly.
        request_overhead_s: host time a continuous-batch request spends before its first
            token outside the forward passes (HTTP, tokenisation, admission, returning the
            token) [s]; time, not GPU energy.
        block_fp8_expert_bytes: bytes per routed-expert weight element that the expert GEMMs
            of a block-scaled FP8 checkpoint served in fp8 are timed at [B/element]
            (`shards.expert_stream_bytes`): 2 where the engine's kernel runs them no faster than
            bf16, less where its fp8 block-scaled MoE kernel is faster (fitted per engine on
            its measured MoE kernel tables, `offline/fitting/engine_moe.py`).
    """

    tensor_efficiency: float
    cuda_core_efficiency: float
    special_function_efficiency: float
    memory_efficiency: float
    elementwise_memory_efficiency: float
    network_efficiency: float
    kernel_launch_s: float
    decode_kernel_launch_s: float
    collective_step_latency_s: float
    prefill_overhead_s: float
    decode_step_overhead_s: float
    decode_overhead_per_sequence_s: float
    gemm_tile_m: int = 64
    decode_overhead_per_worker_s: float = 0.0
    expert_imbalance_per_doubling: float = 0.0
    ttft_wave_share: float = 0.0
    request_overhead_s: float = 0.0
    block_fp8_expert_bytes: float = 2.0


@dataclass(frozen=True, slots=True)
class PowerCoefficients:
    """Dynamic power per unit of utilisation, as fractions of the GPU's (TDP - idle) range.

    A kernel's power is ``idle + (tdp - idle) * (compute * u_compute + memory * u_memory +
    network * u_network)``, capped at TDP, where ``u_x`` is the share of the kernel's time that
    unit x would need at its achievable peak (for the network, bytes on the links only: a
    collective's step latency is time with the links idle and the GPUs waiting on flags).
    During host-side overhead time the GPUs draw ``idle + (tdp - idle) * host_overhead`` (the
    fixed time per decode step and per prefill: mostly the CPU scheduling while the GPUs wait)
    and ``idle + (tdp - idle) * host_per_sequence`` over decode's time per running sequence
    (under vLLM V1 GPU work the roofline misses); both are fitted per serving engine
    (`service.core.host_overhead`).
    """

    compute: float
    memory: float
    network: float
    host_overhead: float
    host_per_sequence: float


@dataclass(frozen=True, slots=True)
class EnergyInterval:
    """Multipliers that bound the energy estimate, from held-out residuals of the fit.

    ``gpu_j_low = low_ratio * gpu_j`` and ``gpu_j_high = high_ratio * gpu_j`` are the
    `lower_quantile` and `upper_quantile` of measured/predicted on families left out of the fit.
    """

    low_ratio: float
    high_ratio: float
    lower_quantile: float
    upper_quantile: float


@dataclass(frozen=True, slots=True)
class CostModelCoefficients:
    """Everything fitted, with the version string that quotes record."""

    version: str
    roofline: RooflineCoefficients
    power: PowerCoefficients
    energy_interval: EnergyInterval


IDEAL_ROOFLINE = RooflineCoefficients(
    tensor_efficiency=1.0,
    cuda_core_efficiency=1.0,
    special_function_efficiency=1.0,
    memory_efficiency=1.0,
    elementwise_memory_efficiency=1.0,
    network_efficiency=1.0,
    kernel_launch_s=0.0,
    decode_kernel_launch_s=0.0,
    collective_step_latency_s=0.0,
    prefill_overhead_s=0.0,
    decode_step_overhead_s=0.0,
    decode_overhead_per_sequence_s=0.0,
    gemm_tile_m=1,
    decode_overhead_per_worker_s=0.0,
    expert_imbalance_per_doubling=0.0,
)
"""Peaks as published, no overheads, no padding: the textbook roofline (used by tests)."""
