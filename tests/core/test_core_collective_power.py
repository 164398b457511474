"""A collective's step latency is time with the links idle: it counts in the kernel's time but
not in its power share, so a latency-bound all-reduce draws (almost) idle power."""

from __future__ import annotations

import dataclasses

from core_support import A100_1_5TB, IDEAL, ONE_LAYER_DENSE, deployment, estimate, row
from numpy.testing import assert_allclose

from service.core.results import RequestEstimate

ARCH = ONE_LAYER_DENSE
LATENCY_S = 1e-3  # per ring step, made large so that latency dominates


def prefill_on_two_gpus() -> RequestEstimate:
    """One 4-token prompt in bf16 on 2 GPUs (tensor parallel), ideal roofline but slow steps."""
    roofline = dataclasses.replace(IDEAL.roofline, collective_step_latency_s=LATENCY_S)
    coefficients = dataclasses.replace(IDEAL, roofline=roofline)
    return estimate(ARCH, 1, 4, 1, deployment(A100_1_5TB, tensor=2), coefficients)


def test_latency_counts_in_time_not_in_network_limb() -> None:
    table = prefill_on_two_gpus().prefill.table
    i = [node.name for node in table.nodes].index("mlp_all_reduce")
    # per GPU: 4 tokens x 1024 x 2 B = 8192 B; ring all-reduce over 2 GPUs puts
    # 2 x (1/2) x 8192 = 8192 B on the links: 8192 / 300e9 = 27.307 ns; 2 x (2 - 1) steps
    assert_allclose(table.network_s[i], 8192 / 300e9, rtol=1e-9)  # time minus latency
    assert_allclose(table.time_s[i], 8192 / 300e9 + 2 * LATENCY_S, rtol=1e-12)


def test_latency_bound_all_reduce_draws_idle_power_plus_its_busy_limbs() -> None:
    all_reduce = row(prefill_on_two_gpus().prefill, "mlp_all_reduce")
    time_s = 8192 / 300e9 + 2 * LATENCY_S
    # busy limbs per GPU: CUDA cores (1/2) x 4096 adds / 19.5e12; memory 2 x 8192 B / 1.5e12;
    # links 8192 B / 300e9; power fractions 0.5, 0.3, 0.1 of (400 - 50) W
    share_s = 0.5 * 2048 / 19.5e12 + 0.3 * 16384 / 1.5e12 + 0.1 * 8192 / 300e9
    expected_j = 2 * (50.0 * time_s + 350.0 * share_s)  # = 0.2000070 J
    assert_allclose(all_reduce.gpu_j, expected_j, rtol=1e-9)
    # within 0.01 % of idle power; pricing the 2 ms of latency at the network fraction would
    # have added 2 GPUs x 0.1 x 350 W x 2 ms = 0.14 J
    assert all_reduce.gpu_j < 1.0001 * 2 * 50.0 * time_s
