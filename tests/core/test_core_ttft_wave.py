"""Time to first token of a request arriving with a wave of the server's sequences
(`RooflineCoefficients.ttft_wave_share`) and its host path (`request_overhead_s`).

Hand-worked on the case of test_core_continuous_batch (one sequence of 100 prompt and 5 output
tokens among C = 10; a pass of its prefill carries 8 decode tokens and 3 prompts, 308 tokens).
Its wave is the 10 running sequences' prompts, W = 1,000 tokens:
- budget 8,192: the wave fits one pass, every prompt waits for all of it: 1,000 tokens, less
  the request's own 100, 900 / 308 = 2.922078 passes;
- budget 408 (3 prompts beside the 8 decode tokens: 308 tokens a pass): (1,000 + 408) / 2 = 704
  on average, less 100: 604 / 308 = 1.961039 passes;
- budget 58 (one 50-token chunk a pass: 58 tokens): (1,000 + 58) / 2 = 529, less 100: 429 / 58
  = 7.396552 passes;
- two attention-data-parallel replicas, budget 8,192: its replica's wave is 5 prompts, 500
  tokens, less 100: 400 over 4 decode + 300 prompt tokens a pass, 400 / 304 = 1.315789.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.testing import assert_allclose

from service.core.estimate import estimate_request
from service.core.steady_state import pass_mix
from service.core.workload import Workload
from tests.core.core_support import IDEAL, ONE_LAYER_DENSE, catalog_gpu, deployment

H100 = deployment(catalog_gpu("H100-SXM5-80GB"))
ONE = np.array([1.0])


def _wave(budget: float, replicas: float = 1.0, continuous: bool = True) -> float:
    mix = pass_mix(ONE, np.array([100.0]), np.array([0.0]), np.array([5.0]), np.array([10.0]),
                   np.array([continuous]), budget, replicas)  # fmt: skip
    return float(mix.wave_passes[0])


def test_wave_passes_by_hand() -> None:
    assert_allclose(_wave(8192.0), 900 / 308, rtol=1e-12)
    assert_allclose(_wave(408.0), 604 / 308, rtol=1e-12)
    assert_allclose(_wave(58.0), 429 / 58, rtol=1e-12)
    assert_allclose(_wave(8192.0, replicas=2.0), 400 / 304, rtol=1e-12)


def test_a_static_batch_has_no_wave() -> None:
    assert _wave(8192.0, continuous=False) == 0.0


def test_wave_and_host_path_add_time_to_first_token_not_energy() -> None:
    # ttft_wave_share 0.5, request_overhead_s 0.02: prefill_s grows by 0.5 x 900 / 308 of the
    # pass carrying the prompt (the prefill phase is one pass here) plus 20 ms.
    roofline = dataclasses.replace(IDEAL.roofline, ttft_wave_share=0.5, request_overhead_s=0.02)
    waved = dataclasses.replace(IDEAL, roofline=roofline)
    workload = Workload(1, 100, 5, concurrent_sequences=10)
    base = estimate_request(ONE_LAYER_DENSE, workload, H100, IDEAL)
    result = estimate_request(ONE_LAYER_DENSE, workload, H100, waved)
    own_pass = base.prefill.table.kernel_time_s + base.prefill.overhead_s
    expected = base.prefill.time_s + 0.5 * 900 / 308 * own_pass + 0.02
    assert_allclose(result.prefill.time_s, expected, rtol=1e-9)
    assert_allclose(result.per_sequence_gpu_j, base.per_sequence_gpu_j, rtol=1e-12)
    assert_allclose(result.time_per_output_token_s, base.time_per_output_token_s, rtol=1e-12)


def test_a_static_batch_keeps_its_prefill() -> None:
    roofline = dataclasses.replace(IDEAL.roofline, ttft_wave_share=0.5, request_overhead_s=0.02)
    waved = dataclasses.replace(IDEAL, roofline=roofline)
    workload = Workload(4, 100, 5)
    base = estimate_request(ONE_LAYER_DENSE, workload, H100, IDEAL)
    result = estimate_request(ONE_LAYER_DENSE, workload, H100, waved)
    assert result.prefill.time_s == base.prefill.time_s
