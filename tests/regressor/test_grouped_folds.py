"""Which rows each grouped fold of offline.training.grouped holds out and trains on, on the
synthetic rows of regressor_support (sources and GPUs worked out from its CASES by hand)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from offline.training.dataset import log_measured, log_served
from offline.training.grouped import engine_masks, gpu_masks, nearest_profile
from tests.regressor.regressor_support import training_rows

# measurement(): a row is v3 when it has EP > 1, or is on H100 at an even index.
# 0 Llama H100 v3, 1 Qwen H100 EP4 v3, 2 Mixtral A100 v2, 3 Gemma A100 v2,
# 4 gpt-oss H100 v3, 5 Phi H100 v2, 6 StarCoder2 H100 v3, 7 CodeLlama A100 v2.


def _indices(mask: np.ndarray) -> list[int]:
    return [int(i) for i in np.flatnonzero(mask)]


def test_a_held_out_gpu_tests_its_v2_rows_and_trains_on_the_other_gpu_only() -> None:
    rows = training_rows()
    test, train = gpu_masks(rows, "H100-SXM5-80GB")
    assert _indices(test) == [5]  # the v3 H100 rows are neither tested nor trained on
    assert _indices(train) == [2, 3, 7]
    test, train = gpu_masks(rows, "A100-SXM4-40GB")
    assert _indices(test) == [2, 3, 7]
    assert _indices(train) == [0, 1, 4, 5, 6]


def test_a_held_out_engine_tests_all_its_rows_and_trains_on_the_others() -> None:
    rows = training_rows()
    test, train = engine_masks(rows, "vllm-v1")
    assert _indices(test) == [0, 1, 4, 6]
    assert _indices(train) == [2, 3, 5, 7]
    test, train = engine_masks(rows, "vllm-v0")
    assert _indices(test) == [2, 3, 5, 7]


def test_a_held_out_engine_takes_the_profile_of_the_nearest_measured_vllm_release() -> None:
    # measured: vllm-v0 0.5.4, vllm-v1 0.11.1, vllm (aiconfigurator) 0.11.2 ... 0.18.0
    assert nearest_profile("vllm-v0") == "vllm-v1"  # 0.5.4 -> 0.11.1 (6 minors) over 0.11.2
    assert nearest_profile("vllm-v1") == "vllm"  # 0.11.1 -> 0.11.2, one patch apart


def test_the_served_quote_of_the_learned_target_is_the_measurement() -> None:
    """target_j = measured x static analytical / served analytical, so a regressor predicting
    the target exactly makes the service's quote (served x prediction / static) the measured
    energy."""
    rows = training_rows()
    target = np.log([r.target_j for r in rows])
    assert np.allclose(log_served(rows, target), log_measured(rows), rtol=0, atol=1e-12)
    row = rows[0]
    assert row.target_j == pytest.approx(row.measured_j * row.analytical_j / row.served_j)
