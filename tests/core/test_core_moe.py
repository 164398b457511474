"""Mixture-of-experts: expected touched experts and the expert weights a decode step reads."""

from __future__ import annotations

from core_support import catalog_arch, catalog_gpu, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.moe import expected_touched_experts

EXPERT_KERNELS = {"moe_gate_up", "moe_down"}
H200 = "H200-SXM-141GB"  # Mixtral in bf16 (93 GB) fits one


def test_one_token_touches_its_top_k() -> None:
    # 8·(1 - (1 - 2/8)¹) = 8·0.25 = 2
    assert_allclose(expected_touched_experts(1, 8, 2), 2.0, rtol=1e-12)


def test_two_tokens_overlap() -> None:
    # 8·(1 - 0.75²) = 8·0.4375 = 3.5
    assert_allclose(expected_touched_experts(2, 8, 2), 3.5, rtol=1e-12)


def test_many_tokens_touch_every_expert() -> None:
    assert_allclose(expected_touched_experts(4096, 8, 2), 8.0, rtol=1e-12)
    assert_allclose(expected_touched_experts(100_000, 256, 8), 256.0, rtol=1e-12)


def test_mixtral_decode_step_reads_two_of_eight_experts() -> None:
    arch = catalog_arch("mistralai/Mixtral-8x7B-Instruct-v0.1")  # H 4096, 32 layers, FFN 14336
    outputs = 5
    decode = estimate(arch, 1, 64, outputs, deployment(catalog_gpu(H200))).decode
    steps = outputs - 1
    # one expert: gate, up, down = 3·4096·14336 = 176,160,768 elements; 2 of 8 per layer, bf16:
    #   32 layers · 2 · 176,160,768 · 2 B = 22,548,578,304 B per step
    assert_allclose(column_sum(decode, "weight_bytes", EXPERT_KERNELS) / steps, 22_548_578_304)
    # plus per layer: attention 4096·(4096 + 2·1024) + 4096² = 41,943,040, router 4096·8 = 32,768
    #   -> 32 · 41,975,808 · 2 B = 2,686,451,712; two RMSNorm weights 32 · 2 · 4096 · 2 = 524,288
    # and per step: embedding row 8,192, final norm 8,192, LM head 4096·32000·2 = 262,144,000
    per_step = 22_548_578_304 + 2_686_451_712 + 524_288 + 8_192 + 8_192 + 262_144_000
    assert_allclose(column_sum(decode, "weight_bytes") / steps, per_step, rtol=1e-12)


def test_mixtral_prefill_reads_every_expert() -> None:
    arch = catalog_arch("mistralai/Mixtral-8x7B-Instruct-v0.1")
    prefill = estimate(arch, 4, 512, 1, deployment(catalog_gpu(H200))).prefill
    # 2048 tokens touch all 8 experts (8·(1 - 0.75²⁰⁴⁸) = 8): 32 · 8 · 176,160,768 · 2 B
    assert_allclose(column_sum(prefill, "weight_bytes", EXPERT_KERNELS), 90_194_313_216)
    # while the FLOPs are those of 2 experts per token: 2 · 2048 · 2 · 176,160,768 · 32 layers
    assert_allclose(column_sum(prefill, "tensor_flops", EXPERT_KERNELS), 46_179_488_366_592)
