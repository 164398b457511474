"""Host-side time of each phase (the GPUs run no kernels), and the GPU energy drawn meanwhile.

Per decode step the engine spends a fixed time, a time per running sequence, and a time per
GPU worker beyond the first (the driver hands the step's inputs to each worker process). During
the first two the GPUs draw the engine's fitted host-overhead power (under vLLM V1 much of that
time is GPU work the roofline misses); while the driver feeds the workers they wait on it and
draw idle power. Works on floats and, element-wise, on arrays of workloads.
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


def worker_wait_s(roofline: RooflineCoefficients, steps: Number, workers: int) -> Number:
    """The part of decode's host-side time spent feeding `workers` GPU workers [s]."""
    return steps * roofline.decode_overhead_per_worker_s * (workers - 1)


def overhead_gpu_j(
    overhead_s: Number,
    wait_s: Number,
    gpu: GpuSpec,
    power: PowerCoefficients,
    held: int,
) -> Number:
    """GPU energy [J] of `held` GPUs over `overhead_s` of host time, `wait_s` of it at idle."""
    overhead_w = gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * power.host_overhead
    return held * (overhead_w * (overhead_s - wait_s) + gpu.idle_w * wait_s)
