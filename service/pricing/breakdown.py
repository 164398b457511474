"""The verbose breakdown's rows beyond the kernels, so that its rows add up to the quote.

Per phase, the kernels' times and energies cover the GPU work the roofline prices; the quote
adds the engine's host-side time (scheduling, input preparation, the continuous batch's wait
and prefill waves) and the energy the GPUs draw meanwhile (service.core.host_overhead), in
disaggregated serving the KV hand-off between its workers (`kind` "kv_transfer", `bound`
"network", its link in the kernel name, service.core.kv_transfer), and, when the learned
regressor or a calibration answers, their correction of the phase energy and time. Each becomes
one row (`kind` "host_overhead" or "correction", `bound` "host" or "learned"),
so that per phase the rows' `time_s` sum to the quoted phase time and their `gpu_j` to the
quoted phase energy.
"""

from __future__ import annotations

from service.core.results import PhaseCost, RequestEstimate
from service.schemas.estimate_response import KernelRowOut


def _row(
    phase: PhaseCost,
    kind: str,
    bound: str,
    executions: int,
    time_s: float,
    gpu_j: float,
    network_bytes: float = 0.0,
    kernel: str = "",
) -> KernelRowOut:
    return KernelRowOut(
        phase=phase.phase.value,
        kernel=kernel or kind,
        kind=kind,
        executions=executions,
        tensor_flops=0.0,
        cuda_core_ops=0.0,
        special_function_ops=0.0,
        memory_bytes=0.0,
        network_bytes=network_bytes,
        bound=bound,
        compute_precision="none",
        time_s=time_s,
        gpu_j=gpu_j,
        arithmetic_intensity_flops_per_byte=0.0,
        ridge_point_flops_per_byte=0.0,
    )


def beyond_kernel_rows(
    estimate: RequestEstimate,
    quoted_s: tuple[float, float],
    quoted_j: tuple[float, float],
) -> list[KernelRowOut]:
    """Per phase (prefill, decode): the host-overhead row (the analytical phase time [s] and
    energy [J] less the kernels'), then, where the quoted phase time `quoted_s` or energy
    `quoted_j` differs from the analytical one, the correction row (quoted - analytical)."""
    rows = []
    for phase, time_s, gpu_j in zip(
        (estimate.prefill, estimate.decode), quoted_s, quoted_j, strict=True
    ):
        kernels = phase.kernels
        kernel_s = sum(float(k.time_s) for k in kernels)
        kernel_j = sum(float(k.gpu_j) for k in kernels)
        moved = estimate.kv_transfer if phase is estimate.prefill else None
        if moved is not None:  # disaggregated serving's KV hand-off, a row of its own
            link = f"kv_transfer ({moved.link})"
            rows.append(
                _row(
                    phase, "kv_transfer", "network", 1, moved.time_s, moved.gpu_j, moved.bytes, link
                )
            )
            kernel_s, kernel_j = kernel_s + moved.time_s, kernel_j + moved.gpu_j
        rows.append(
            _row(
                phase,
                "host_overhead",
                "host",
                phase.steps,
                phase.time_s - kernel_s,
                phase.gpu_j - kernel_j,
            )
        )
        if gpu_j != phase.gpu_j or time_s != phase.time_s:
            moved_s, moved_j = time_s - phase.time_s, gpu_j - phase.gpu_j
            rows.append(_row(phase, "correction", "learned", 0, moved_s, moved_j))
    return rows
