"""Host-side time of each phase (the roofline's kernels do not cover it), and the GPU energy
drawn meanwhile.

Per decode step the engine spends a fixed time, a time per running sequence, and a time per
GPU worker beyond the first (the driver hands the step's inputs to each worker process). Each
part draws its own power, fitted per serving engine:
- the fixed time (and prefill's overhead) at the engine's host-overhead power: the CPU
  schedules and prepares the step while the GPUs mostly wait;
- the per-sequence time at the engine's per-sequence power: under vLLM V1 it is GPU work the
  roofline misses (the v3 rows' own power rises from ~490 W at 8 sequences to ~690 W of 700
  at 192 and more, Llama-3.1-8B on H100);
- while the driver feeds the workers, the GPUs wait on it at idle power.
Works on floats and, element-wise, on arrays of workloads.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from service.core.coefficients import PowerCoefficients, RooflineCoefficients
from service.core.hardware import GpuSpec

Number = TypeVar("Number", float, npt.NDArray[np.float64])


def decode_overhead_s(
    roofline: RooflineCoefficients, batch: Number, steps: Number, workers: int
) -> Number:
    """Host-side time of `steps` decode steps of `batch` sequences on `workers` GPUs [s]."""
    per_step = (
        roofline.decode_step_overhead_s
        + roofline.decode_overhead_per_sequence_s * batch
        + roofline.decode_overhead_per_worker_s * (workers - 1)
    )
    return steps * per_step


def per_sequence_s(roofline: RooflineCoefficients, batch: Number, steps: Number) -> Number:
    """The part of decode's host-side time that grows with the running sequences [s]."""
    return steps * roofline.decode_overhead_per_sequence_s * batch


def worker_wait_s(roofline: RooflineCoefficients, steps: Number, workers: int) -> Number:
    """The part of decode's host-side time spent feeding `workers` GPU workers [s]."""
    return steps * roofline.decode_overhead_per_worker_s * (workers - 1)


def overhead_gpu_j(
    overhead_s: Number,
    sequences_s: Number,
    wait_s: Number,
    gpu: GpuSpec,
    power: PowerCoefficients,
    held: int,
) -> Number:
    """GPU energy [J] of `held` GPUs over `overhead_s` of host time: `sequences_s` of it at the
    per-sequence power, `wait_s` at idle, the rest at the host-overhead power."""
    dynamic_w = gpu.tdp_w - gpu.idle_w
    overhead_w = gpu.idle_w + dynamic_w * power.host_overhead
    sequences_w = gpu.idle_w + dynamic_w * power.host_per_sequence
    fixed_s = overhead_s - sequences_s - wait_s
    return held * (overhead_w * fixed_s + sequences_w * sequences_s + gpu.idle_w * wait_s)
