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
Element-wise on arrays of workloads, each with its own context's coefficients.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from service.core.pass_plans import ContextRows

FloatArray = npt.NDArray[np.float64]


def decode_host_s(
    rows: ContextRows, batch: FloatArray, steps: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Host-side time of `steps` decode steps of `batch` sequences on each row's GPUs [s]:
    all of it, its part that grows with the running sequences, and its part spent feeding
    each row's GPU workers (the last two are in the first)."""
    sequence_s = rows.decode_overhead_per_sequence_s * batch  # per step
    per_step = rows.decode_step_overhead_s + sequence_s + rows.worker_overhead_s
    return steps * per_step, steps * sequence_s, steps * rows.worker_overhead_s


def overhead_gpu_j(
    rows: ContextRows, overhead_s: FloatArray, sequences_s: FloatArray, wait_s: FloatArray
) -> FloatArray:
    """GPU energy [J] of each row's GPUs over `overhead_s` of host time: `sequences_s` of it at
    the per-sequence power, `wait_s` at idle, the rest at the host-overhead power."""
    fixed_s = overhead_s - sequences_s - wait_s
    result: FloatArray = rows.held * (
        rows.host_overhead_w * fixed_s + rows.host_sequence_w * sequences_s + rows.idle_w * wait_s
    )
    return result
