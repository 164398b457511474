"""The experts a continuous batch's decode passes touch, taken over the passes as they run
(service.core.terms.decode_expert_terms_many), against numbers worked out by hand.

Qwen3-30B-A3B (128 experts, top-8) on one H100, budget 8,192 tokens a pass; one request of
1,024 prompt and 128 output tokens among C = 8:
- a mean decode pass advances d = 8 x 127 / 128 = 7.9375 sequences and carries, on average,
  a = 8 / 128 x 1,024 = 64 prompt tokens;
- prompts come whole (1,024 <= 8,192 - 7.9375), so f = 64 / 1,024 = 0.0625 of the passes carry
  one (7.9375 + 1,024 = 1,031.9375 tokens) and the rest only the 7.9375 decode tokens;
- touched(t) = 128 (1 - (120 / 128)^t): 128.0 at 1,031.9375 tokens, 51.311194 at 7.9375;
  mixed 0.0625 x 128 + 0.9375 x 51.311194 = 56.104244 experts (a pass of the mean 71.9375
  tokens would touch 126.767197);
- expert rows stay linear: (7.9375 + 64) x 8 = 575.5 token-expert assignments.
"""

from __future__ import annotations

import numpy as np
from numpy.testing import assert_allclose

from service.core.estimate import pricing_context
from service.core.pass_plans import ContextRows
from service.core.steady_state import pass_mix
from service.core.terms import decode_expert_terms_many, expert_terms_many
from tests.core.core_support import IDEAL, catalog_arch, catalog_gpu, deployment

QWEN3_30B = "Qwen/Qwen3-30B-A3B"


def _rows() -> ContextRows:
    context = pricing_context(
        catalog_arch(QWEN3_30B), deployment(catalog_gpu("H100-SXM5-80GB")), IDEAL
    )
    return ContextRows.of([context], np.array([0]))


def _mix(continuous: bool):  # type: ignore[no-untyped-def]
    one = np.array([1.0])
    return pass_mix(one, np.array([1024.0]), np.array([0.0]), np.array([128.0]),
                    np.array([8.0]), np.array([continuous]), 8192.0)  # fmt: skip


def test_decode_passes_touch_the_mix_of_chunk_and_decode_passes() -> None:
    rows, mix = _rows(), _mix(True)
    assignments, _, touched = decode_expert_terms_many(rows, mix)
    assert_allclose(touched, [56.104244], rtol=1e-7)
    assert_allclose(assignments, [575.5], rtol=1e-12)
    _, _, mean_pass = expert_terms_many(rows, mix.decoding[1] + mix.prefilling[1] * 1024.0)
    assert_allclose(mean_pass, [126.767197], rtol=1e-7)


def test_a_static_batch_decodes_its_own_tokens_only() -> None:
    rows, mix = _rows(), _mix(False)
    # Static: one sequence decoding, no prompt in decode passes: touched(1) = 8 experts.
    _, _, touched = decode_expert_terms_many(rows, mix)
    assert_allclose(touched, [8.0], rtol=1e-12)
