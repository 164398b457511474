"""Host-overhead fit: the time per decode step per GPU worker beyond the first is recovered from
rows of several tensor-parallel degrees, held at 0 for an engine without a driver hand-off, and
drawn at idle power in the energy."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_power_fit import _row

from offline.fitting.end_to_end import (
    EndToEndRow,
    fit_overheads,
    predicted_per_sequence_j,
    predicted_prefill_s,
    predicted_tpot_s,
)

TRUTH = (0.02, 0.01, 2e-4, 1e-5, 8e-3)


def _timed_rows(seed: int) -> list[EndToEndRow]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(60):
        r = replace(_row(rng, "vllm-v0"), gpu_count=(1, 2, 4, 8)[i % 4])
        (tpot,) = predicted_tpot_s([r], TRUTH)
        (prefill,) = predicted_prefill_s([r], TRUTH)
        rows.append(replace(r, measured_tpot_s=float(tpot), measured_prefill_s=float(prefill)))
    return rows


def test_fit_recovers_the_time_per_worker() -> None:
    fitted = fit_overheads(_timed_rows(0))
    assert fitted[4] == pytest.approx(TRUTH[4], rel=1e-3)
    assert fitted[1] == pytest.approx(TRUTH[1], rel=1e-3)
    assert fitted[2] == pytest.approx(TRUTH[2], rel=1e-3)


def test_without_a_driver_hand_off_the_time_per_worker_is_zero() -> None:
    assert fit_overheads(_timed_rows(1), per_worker=False)[4] == 0.0


def test_the_time_per_worker_draws_idle_power() -> None:
    rng = np.random.default_rng(2)
    r = replace(_row(rng, "vllm-v0"), gpu_count=4, group_gpus=4, decode_steps=100, batch_size=10)
    power = np.array([0.9, 0.6, 0.5, 0.3, 0.8])
    without = (*TRUTH[:4], 0.0)
    (with_j,) = predicted_per_sequence_j([r], TRUTH, power)
    (without_j,) = predicted_per_sequence_j([r], without, power)
    # 100 steps x 3 workers x 8 ms = 2.4 s on 4 GPUs at 80 W idle, per sequence of 10
    assert with_j - without_j == pytest.approx(2.4 * 4 * 80.0 / 10, rel=1e-9)
