"""Scheduling, not refusal: a batch whose KV cache does not fit at once runs in waves of as many
sequences as fit beside the weights; only one sequence that cannot fit alone is refused.

Hand-worked figures, Llama-3.1-8B in bf16 on one H100-SXM5-80GB (80e9 B):
- weights: 32 layers x (4096 x 6144 + 4096 x 4096 attention + 3 x 4096 x 14336 MLP)
  + 2 x 128256 x 4096 tables = 8,029,995,008 parameters x 2 B = 16,059,990,016 B;
  free beside them: 80e9 - 16,059,990,016 = 63,940,009,984 B.
- KV cache per token: 32 layers x (K and V) x 8 heads x 128 x 2 B = 131,072 B.
- a 690 + 397-token sequence at its longest: 1,087 x 131,072 = 142,475,264 B, so
  floor(63,940,009,984 / 142,475,264) = floor(448.78) = 448 fit at once.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from service.core.cost_model_errors import InsufficientMemory
from service.core.estimate import estimate_request
from service.core.schedule import kv_schedule
from service.core.workload import Workload
from tests.core.core_support import REALISTIC, catalog_arch, catalog_gpu, deployment

LLAMA_8B = catalog_arch("meta-llama/Llama-3.1-8B-Instruct")
H100 = deployment(catalog_gpu("H100-SXM5-80GB"))
FREE_B = 80e9 - 16_059_990_016
SEQUENCE_B = 1087 * 131_072


def test_free_memory_and_sequence_size_are_the_hand_worked_ones() -> None:
    alone = estimate_request(LLAMA_8B, Workload(1, 690, 397), H100, REALISTIC)
    assert alone.memory.weight_bytes_per_gpu == 16_059_990_016
    assert alone.memory.kv_cache_bytes_per_gpu == SEQUENCE_B


def test_a_batch_twice_what_fits_runs_as_two_waves_of_what_fits() -> None:
    # 896 = 2 x 448 sequences: two waves of the 448 that fit, one after the other.
    both = estimate_request(LLAMA_8B, Workload(896, 690, 397), H100, REALISTIC)
    one = estimate_request(LLAMA_8B, Workload(448, 690, 397), H100, REALISTIC)
    assert not one.warnings
    assert_allclose(both.gpu_j, 2 * one.gpu_j, rtol=1e-12)
    assert_allclose(both.prefill.time_s, 2 * one.prefill.time_s, rtol=1e-12)
    assert_allclose(both.decode.time_s, 2 * one.decode.time_s, rtol=1e-12)
    assert_allclose(both.time_per_output_token_s, one.time_per_output_token_s, rtol=1e-12)
    assert (both.prefill.steps, both.decode.steps) == (2, 2 * 396)
    assert both.memory.kv_cache_bytes_per_gpu == 448 * SEQUENCE_B  # what is held at once
    assert any("2 waves of 448 sequences" in w for w in both.warnings)


def test_the_measured_511_sequence_row_is_scheduled_not_refused() -> None:
    # ML.ENERGY v3 Llama-3.1-8B, 511 sequences of 690 + 397 tokens read as a static batch:
    # 511 x 142,475,264 + 16,059,990,016 B = 82.8 GiB > 80e9 B; ceil(511 / 448) = 2 waves.
    result = estimate_request(LLAMA_8B, Workload(511, 690, 397), H100, REALISTIC)
    assert result.memory.kv_cache_bytes_per_gpu == pytest.approx(255.5 * SEQUENCE_B)
    assert any("2 waves of 255.5 sequences" in w for w in result.warnings)
    assert result.decode.steps == 2 * 396


def test_kv_schedule_by_hand() -> None:
    schedule = kv_schedule(
        batch=np.array([100.0, 7.0, 1.0, 1.0]),
        running=np.array([0.0, 0.0, 50.0, 8.0]),
        continuous=np.array([False, False, True, True]),
        full_bytes=np.array([10.0, 10.0, 10.0, 10.0]),
        mean_bytes=np.array([10.0, 10.0, 6.0, 6.0]),
        free_bytes=305.0,
        limited=True,
    )
    # Static: 30 fit -> ceil(100 / 30) = 4 waves of 25; 7 fit in one. Continuous: 305 / 6 ->
    # 50 running sequences held (the 50 asked); 8 asked -> 8.
    assert_allclose(schedule.waves, [4.0, 1.0, 1.0, 1.0])
    assert_allclose(schedule.batch, [25.0, 7.0, 1.0, 1.0])
    assert_allclose(schedule.running, [25.0, 7.0, 50.0, 8.0])
    assert_allclose(schedule.kv_cache_bytes, [250.0, 70.0, 300.0, 48.0])
    assert schedule.notes[1:] == ("", "", "")
    assert "4 waves of 25 sequences" in schedule.notes[0]


def test_more_running_sequences_than_the_kv_cache_holds_are_priced_at_what_it_holds() -> None:
    schedule = kv_schedule(
        batch=np.array([1.0]),
        running=np.array([60.0]),
        continuous=np.array([True]),
        full_bytes=np.array([10.0]),
        mean_bytes=np.array([6.0]),
        free_bytes=305.0,
        limited=True,
    )
    assert_allclose(schedule.running, [50.0])  # floor(305 / 6)
    assert "holds about 50 running sequences of this length, not 60" in schedule.notes[0]


def test_refused_only_when_one_sequence_cannot_fit_beside_the_weights() -> None:
    # L4 (24e9 B): free 24e9 - 16,059,990,016 = 7,940,009,984 B holds 60,577.2 tokens of KV.
    l4 = deployment(catalog_gpu("L4"))
    fits = estimate_request(LLAMA_8B, Workload(1, 60_000, 577), l4, REALISTIC)
    assert fits.memory.kv_cache_bytes_per_gpu == 60_577 * 131_072
    with pytest.raises(InsufficientMemory):
        estimate_request(LLAMA_8B, Workload(1, 60_000, 578), l4, REALISTIC)
    many = estimate_request(LLAMA_8B, Workload(64, 60_000, 577), l4, REALISTIC)
    assert many.decode.steps == 64 * 576  # 64 waves of one sequence each


def test_without_the_memory_check_everything_runs_at_once() -> None:
    result = estimate_request(
        LLAMA_8B, Workload(511, 690, 397), H100, REALISTIC, check_memory=False
    )
    assert result.memory.kv_cache_bytes_per_gpu == 511 * SEQUENCE_B
    assert result.decode.steps == 396 and not result.warnings
