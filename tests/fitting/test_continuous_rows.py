"""ML.ENERGY rows in the fit as the service quotes them: one request joining a continuous
batch. The fit's per-kernel arrays, host time and energy share reproduce the service's
estimate, so the coefficients are fitted on the reading they are served in."""

from __future__ import annotations

import numpy as np
import pytest

from offline.fitting.end_to_end import (
    end_to_end_rows,
    predicted_per_sequence_j,
    predicted_tpot_s,
)
from offline.fitting.request_inputs import mlenergy_inputs
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import load_engine_coefficients
from service.core.estimate import estimate_request
from tests.fitting.test_serving_validation_readings import ROW


def test_the_511_sequence_row_is_fitted_as_the_service_prices_it() -> None:
    models, gpus = load_model_catalog(), load_gpu_catalog()
    coefficients = load_engine_coefficients()["vllm-v1"]
    (row,), skipped = end_to_end_rows([ROW], [], models, gpus, coefficients)
    assert not skipped
    # C = 511, O = 397, P = 690 of which 480 cached (N = 210 computed), budget 8,192: 511 x
    # 396 / 397 decode tokens per pass; the pass with the prompt carries it and 511 / 397
    # arriving prompts, a mean pass the arrivals only. Its energy: its 396 decode and 210
    # prompt tokens of the mean pass, all charged on decode, O / (C (O - 1)) of each pass.
    decode = 511 * 396 / 397
    assert row.running == 511 and row.continuous and row.batch_size == 1
    assert row.share[0] == 0.0
    assert row.share[1] == pytest.approx((396 + 210) / 396 / (decode + 511 / 397 * 210), rel=1e-12)
    assert row.share[1] == pytest.approx(397 / (511 * 396), rel=1e-12)
    r, p = coefficients.roofline, coefficients.power
    overheads = (
        r.prefill_overhead_s,
        r.decode_step_overhead_s,
        r.decode_overhead_per_sequence_s,
        r.decode_kernel_launch_s,
        r.decode_overhead_per_worker_s,
    )
    power = np.array([p.compute, p.memory, p.network, p.host_overhead, p.host_per_sequence])
    inputs = mlenergy_inputs(ROW, models, gpus)
    assert not isinstance(inputs, str)
    served = estimate_request(
        inputs.arch, inputs.workload, inputs.deployment, coefficients, check_memory=False
    )
    fitted_j = predicted_per_sequence_j([row], overheads, power)[0]
    assert fitted_j == pytest.approx(served.per_sequence_gpu_j, rel=1e-9)
    fitted_tpot = predicted_tpot_s([row], overheads)[0]
    assert fitted_tpot == pytest.approx(served.time_per_output_token_s, rel=1e-9)
