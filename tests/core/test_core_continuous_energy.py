"""A continuous-batch request's energy is conserved: O / C of one mean pass per sequence.

Hand-worked on ONE_LAYER_DENSE (two layers, for two pipeline stages) for one sequence of 100
prompt and 5 output tokens among C = 10 (service.core.steady_state): a mean pass carries T = 8
decode + 2 x 100 prompt = 208 tokens, the request's decode 1 of them in each of its O - 1 = 4
decode passes (share 1 / 208), so one mean pass's energy is E = decode x 208 / 4 = 52 x decode.
In steady state C = 10 sequences are replaced every O = 5 passes, so each costs O / C E = 26 x
decode: its 100 prompt tokens are 100 / 208 of a mean pass, 25 x decode, its decode 1 x decode.
Host time and the idle draw of the GPUs of other pipeline stages are energy of the same passes,
shared the same way.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from numpy.testing import assert_allclose

from offline.fitting.end_to_end import _energy_shares
from service.core.estimate import estimate_request
from service.core.results import RequestEstimate
from service.core.steady_state import pass_mix, prompt_to_decode_energy
from service.core.workload import Workload
from tests.core.core_support import (
    ONE_LAYER_DENSE,
    POWER,
    REALISTIC,
    REALISTIC_ROOFLINE,
    catalog_arch,
    catalog_gpu,
    deployment,
)

H100 = catalog_gpu("H100-SXM5-80GB")
TWO_LAYERS = dataclasses.replace(ONE_LAYER_DENSE, num_layers=2)
# Host time per step, per sequence and per worker, drawn at host power fractions above 0.
HOST = dataclasses.replace(
    REALISTIC,
    roofline=dataclasses.replace(
        REALISTIC_ROOFLINE, decode_overhead_per_sequence_s=1e-4, decode_overhead_per_worker_s=2e-3
    ),
    power=dataclasses.replace(POWER, host_overhead=0.4, host_per_sequence=0.9),
)


def continuous(batch: int, output: int, pipeline: int = 1) -> RequestEstimate:
    workload = Workload(batch, 100, output, concurrent_sequences=10)
    return estimate_request(TWO_LAYERS, workload, deployment(H100, pipeline=pipeline), HOST)


@pytest.mark.parametrize("pipeline", [1, 2])
def test_a_request_costs_o_over_c_of_a_mean_pass(pipeline: int) -> None:
    result = continuous(1, 5, pipeline)
    decode = result.decode.gpu_j
    assert decode > 0
    assert_allclose(result.prefill.gpu_j, 25.0 * decode, rtol=1e-12)
    assert_allclose(result.gpu_j, 26.0 * decode, rtol=1e-12)
    # The prefill kernels' energies are scaled alike: they still add up to the phase's.
    table = result.prefill.table
    assert_allclose(table.gpu_j.sum(), table.kernel_gpu_j, rtol=1e-12)
    assert table.kernel_gpu_j < result.prefill.gpu_j  # host and idle energy on top


def test_the_host_and_idle_draw_are_shared_like_the_kernels() -> None:
    # Doubling the pipeline adds idle draw to every pass; the request still pays 26 x its
    # decode energy, which grows with it.
    one, two = continuous(1, 5, 1), continuous(1, 5, 2)
    assert two.decode.gpu_j > one.decode.gpu_j
    assert_allclose(two.gpu_j / two.decode.gpu_j, one.gpu_j / one.decode.gpu_j, rtol=1e-12)


def test_more_sequences_pay_in_proportion() -> None:
    one, four = continuous(1, 5), continuous(4, 5)
    assert_allclose(four.gpu_j, 4.0 * one.gpu_j, rtol=1e-12)


def test_the_ratio_and_the_fits_shares_by_hand() -> None:
    one = np.array([1.0])
    mix = pass_mix(one, np.array([100.0]), np.array([40.0]), np.array([5.0]), np.array([10.0]),
                   np.array([True]), 8192.0)  # fmt: skip
    # 60 computed tokens against 4 decode tokens.
    assert_allclose(prompt_to_decode_energy(mix, np.array([5.0])), [15.0])
    # T = 8 + 2 x 60 = 128: decode share 1 / 128, all the request's 64 tokens on it.
    prefill, decode = _energy_shares(mix, 5)
    assert prefill == 0.0
    assert decode == pytest.approx(64 / (128 * 4), rel=1e-12)  # b O / (C (O - 1)) = 5 / 40
    assert decode == pytest.approx(5 / 40, rel=1e-12)


def test_static_and_single_token_requests_keep_their_own_prefill() -> None:
    mix = pass_mix(np.ones(3), np.full(3, 100.0), np.zeros(3), np.array([5.0, 1.0, 5.0]),
                   np.full(3, 10.0), np.array([True, True, False]), 8192.0)  # fmt: skip
    ratio = prompt_to_decode_energy(mix, np.array([5.0, 1.0, 5.0]))
    assert ratio[0] == 25.0 and np.isnan(ratio[1:]).all()
    single = continuous(1, 1)
    assert single.decode.gpu_j == 0.0 and single.prefill.gpu_j > 0.0


def test_a_catalogue_model_at_eight_running_sequences() -> None:
    # Llama-3.1-8B, 690 prompt tokens (480 cached: 210 computed), 397 output, 8 running:
    # O / C x (mean pass) = (396 + 210) / 396 x decode.
    arch = catalog_arch("meta-llama/Llama-3.1-8B-Instruct")
    workload = Workload(1, 690, 397, cached_prompt_tokens=480, concurrent_sequences=8)
    result = estimate_request(arch, workload, deployment(H100), REALISTIC)
    assert_allclose(result.gpu_j, 606 / 396 * result.decode.gpu_j, rtol=1e-12)
