"""Mixture-of-experts: expected touched experts and the expert weights a decode step reads."""

from __future__ import annotations

from dataclasses import replace

import pytest
from core_support import BF16, catalog_arch, catalog_gpu, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture
from service.core.dtypes import DType
from service.core.moe import expected_touched_experts
from service.core.shards import shard_shapes
from service.core.workload import Precision

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


FP8 = Precision(DType.FP8, DType.FP8, DType.BF16)
MIXTRAL_EXPERT_BYTES_16_BIT = 22_548_578_304  # per decode step of one sequence, as above


def _decode_expert_bytes_per_step(arch: ModelArchitecture, precision: Precision) -> float:
    outputs = 5
    dep = deployment(catalog_gpu(H200), precision=precision)
    decode = estimate(arch, 1, 64, outputs, dep).decode
    return column_sum(decode, "weight_bytes", EXPERT_KERNELS) / (outputs - 1)


def test_block_scaled_fp8_experts_are_read_at_the_16_bit_size() -> None:
    plain = catalog_arch("mistralai/Mixtral-8x7B-Instruct-v0.1")
    block = replace(plain, fp8_block_scaled=True)
    # per-channel fp8: 32 layers · 2 experts · 176,160,768 elements · 1 B = 11,274,289,152
    assert_allclose(_decode_expert_bytes_per_step(plain, FP8), 11_274_289_152)
    # block-scaled fp8 runs vLLM's block fused-MoE kernel, no faster than bf16: priced at 2 B
    assert_allclose(_decode_expert_bytes_per_step(block, FP8), MIXTRAL_EXPERT_BYTES_16_BIT)
    # the flag says how fp8 weights are scaled: bf16 weights are read at 2 B either way
    assert_allclose(_decode_expert_bytes_per_step(block, BF16), MIXTRAL_EXPERT_BYTES_16_BIT)


def test_block_scaled_fp8_stores_1_byte_and_its_block_scales() -> None:
    plain = catalog_arch("mistralai/Mixtral-8x7B-Instruct-v0.1")
    block = replace(plain, fp8_block_scaled=True)
    dep = deployment(catalog_gpu(H200), precision=FP8)
    # one fp32 scale per 128 x 128 block: 4 B per 16,384 weights
    assert shard_shapes(block, dep).weight_bytes == pytest.approx(1 + 4 / 16384)
    assert shard_shapes(plain, dep).weight_bytes == 1.0
    assert shard_shapes(block, dep).expert_stream_bytes == 2.0
    assert shard_shapes(plain, dep).expert_stream_bytes == 1.0
    footprint = estimate(block, 1, 64, 5, dep).memory.required_bytes_per_gpu
    plain_footprint = estimate(plain, 1, 64, 5, dep).memory.required_bytes_per_gpu
    assert plain_footprint < footprint < plain_footprint * (1 + 4 / 16384)


def test_catalogue_marks_block_scaled_fp8_checkpoints() -> None:
    # config.json quantization_config.weight_block_size [128, 128] (Qwen3 FP8, DeepSeek-V3)
    assert catalog_arch("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8").fp8_block_scaled
    assert catalog_arch("deepseek-ai/DeepSeek-V3").fp8_block_scaled
    # fbgemm per-channel fp8: not block-scaled
    assert not catalog_arch("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8").fp8_block_scaled
