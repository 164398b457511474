"""Host time per decode step: fixed, per running sequence, and per GPU worker beyond the first;
the per-worker part (the driver feeding its workers) draws idle power, the per-sequence part the
engine's per-sequence power, the fixed part its host-overhead power. Hand-computed numbers; the
one-request and many-request paths agree."""

from __future__ import annotations

import dataclasses

import numpy as np
from core_support import A100_1_5TB, IDEAL, ONE_LAYER_DENSE, POWER, deployment, estimate
from numpy.testing import assert_allclose

from service.core.coefficients import CostModelCoefficients
from service.core.estimate import estimate_workloads, pricing_context
from service.core.host_overhead import decode_host_s, overhead_gpu_j
from service.core.pass_plans import ContextRows
from service.core.workload import Workload

ARCH = ONE_LAYER_DENSE
ROOFLINE = dataclasses.replace(
    IDEAL.roofline,
    decode_step_overhead_s=2e-3,
    decode_overhead_per_sequence_s=1e-4,
    decode_overhead_per_worker_s=5e-3,
)
POWER_SPLIT = dataclasses.replace(POWER, host_overhead=0.4, host_per_sequence=0.9)
COEFFICIENTS = dataclasses.replace(IDEAL, roofline=ROOFLINE, power=POWER_SPLIT)


def rows_of(gpus: int, coefficients: CostModelCoefficients = COEFFICIENTS) -> ContextRows:
    """The context constants of one workload of ARCH on `gpus` A100s (tensor parallel)."""
    context = pricing_context(ARCH, deployment(A100_1_5TB, tensor=gpus), coefficients)
    return ContextRows.of([context], np.zeros(1, dtype=np.intp))


def one(value: float) -> np.ndarray:
    return np.array([value])


def test_decode_overhead_adds_a_term_per_worker_beyond_the_first() -> None:
    # 9 steps x (2 ms + 16 sequences x 0.1 ms + (4 - 1) workers x 5 ms) = 9 x 18.6 ms
    four, single = rows_of(4), rows_of(1)
    overhead_s, sequences_s, wait_s = decode_host_s(four, one(16.0), one(9.0))
    assert_allclose(overhead_s, [0.1674], rtol=1e-12)
    assert_allclose(wait_s, [0.135], rtol=1e-12)
    # 9 steps x 16 sequences x 0.1 ms
    assert_allclose(sequences_s, [0.0144], rtol=1e-12)
    # one GPU: no worker to feed
    overhead_s, _, wait_s = decode_host_s(single, one(16.0), one(9.0))
    assert_allclose(overhead_s, [0.0324], rtol=1e-12)
    assert wait_s[0] == 0.0


def test_each_part_of_the_host_time_draws_its_own_power() -> None:
    # 4 GPUs (idle 50 W, TDP 400 W): the fixed 9 x 2 ms = 0.018 s at 50 + 0.4 x 350 = 190 W,
    # the per-sequence 0.0144 s at 50 + 0.9 x 350 = 365 W, the workers' 0.135 s at 50 W
    expected_j = 4 * (190.0 * 0.018 + 365.0 * 0.0144 + 50.0 * 0.135)  # = 61.704 J
    times = (one(0.1674), one(0.0144), one(0.135))
    assert_allclose(overhead_gpu_j(rows_of(4), *times), [expected_j], rtol=1e-12)
    # one power for both parts: the fixed and per-sequence time at 190 W, as before the split
    same = dataclasses.replace(POWER_SPLIT, host_per_sequence=0.4)
    expected_j = 4 * (190.0 * 0.0324 + 50.0 * 0.135)  # = 51.624 J
    same_rows = rows_of(4, dataclasses.replace(COEFFICIENTS, power=same))
    assert_allclose(overhead_gpu_j(same_rows, *times), [expected_j])


def test_estimate_prices_the_worker_term_in_time_and_energy() -> None:
    dep = deployment(A100_1_5TB, tensor=4)
    result = estimate(ARCH, 16, 8, 10, dep, COEFFICIENTS)
    assert_allclose(result.decode.overhead_s, 0.1674, rtol=1e-12)
    kernel_j = result.decode.table.kernel_gpu_j
    assert_allclose(result.decode.gpu_j - kernel_j, 61.704, rtol=1e-9)
    without = dataclasses.replace(ROOFLINE, decode_overhead_per_worker_s=0.0)
    base = estimate(ARCH, 16, 8, 10, dep, dataclasses.replace(COEFFICIENTS, roofline=without))
    assert_allclose(result.decode.time_s - base.decode.time_s, 0.135, rtol=1e-9)
    assert_allclose(result.decode.gpu_j - base.decode.gpu_j, 4 * 50.0 * 0.135, rtol=1e-9)


def test_many_workloads_agree_with_one_request_each() -> None:
    dep = deployment(A100_1_5TB, tensor=2)
    workloads = [Workload(4, 8, 10), Workload(32, 16, 3)]
    batch, errors = estimate_workloads(ARCH, workloads, dep, COEFFICIENTS)
    assert not errors
    for j, workload in enumerate(workloads):
        one = estimate(
            ARCH,
            workload.batch_size,
            workload.prompt_tokens,
            workload.output_tokens,
            dep,
            COEFFICIENTS,
        )
        assert_allclose(batch.overhead_s[:, j], [one.prefill.overhead_s, one.decode.overhead_s])
        assert_allclose(
            batch.phase_gpu_j[:, j], np.array([one.prefill.gpu_j, one.decode.gpu_j]), rtol=1e-9
        )
