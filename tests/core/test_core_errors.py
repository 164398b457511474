"""Bad input raises the typed error, naming the field and saying what to change."""

from __future__ import annotations

import dataclasses

import pytest
from core_support import A100_1_5TB, IDEAL, catalog_arch, catalog_gpu, deployment, estimate

from service.catalog import load_model_catalog
from service.core.architecture import ModelArchitecture, default_head_dim
from service.core.cost_model_errors import (
    InsufficientMemory,
    InvalidArchitecture,
    InvalidParallelism,
    InvalidWorkload,
    UnsupportedArchitecture,
    UnsupportedPrecision,
)
from service.core.dtypes import DType
from service.core.estimate import estimate_request
from service.core.workload import Precision, Workload

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"  # 32 heads, 8 KV heads
MOE = ModelArchitecture(
    hidden_size=1024,
    num_layers=2,
    num_attention_heads=8,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=2048,
    vocab_size=1000,
    num_experts=6,
    experts_per_token=2,
    num_moe_layers=2,
)


@pytest.mark.parametrize("field", ["batch_size", "prompt_tokens", "output_tokens"])
def test_zero_tokens_or_sequences(field: str) -> None:
    workload = dataclasses.replace(Workload(1, 16, 16), **{field: 0})
    with pytest.raises(InvalidWorkload, match=f"{field} must be at least 1") as caught:
        estimate_request(catalog_arch(LLAMA_8B), workload, deployment(A100_1_5TB), IDEAL)
    assert caught.value.field == f"workload.{field}"


def test_sequence_beyond_the_context() -> None:
    arch = catalog_arch("meta-llama/Llama-2-7b-hf")  # 4,096-token context
    with pytest.raises(InvalidWorkload, match=r"4100 exceeds .* 4096 tokens; shorten") as caught:
        estimate(arch, 1, 4000, 100, deployment(A100_1_5TB))
    assert caught.value.field == "workload.output_tokens"


def test_heads_not_dividing_hidden_size() -> None:
    with pytest.raises(InvalidArchitecture, match="give head_dim explicitly") as caught:
        default_head_dim(4096, 3)
    assert caught.value.field == "num_attention_heads"


def test_tensor_degree_not_dividing_heads() -> None:
    with pytest.raises(InvalidParallelism, match="divide the 32 attention heads") as caught:
        estimate(catalog_arch(LLAMA_8B), 1, 16, 16, deployment(A100_1_5TB, tensor=3))
    assert caught.value.field == "hardware.parallelism.tensor"


def test_expert_parallel_on_a_dense_model() -> None:
    with pytest.raises(InvalidParallelism, match=r"set parallelism\.expert to 1") as caught:
        estimate(catalog_arch(LLAMA_8B), 1, 16, 16, deployment(A100_1_5TB, expert=2))
    assert caught.value.field == "hardware.parallelism.expert"


def test_experts_not_divisible() -> None:
    with pytest.raises(InvalidParallelism, match=r"expert = 4 must divide the 6 experts"):
        estimate(MOE, 1, 16, 16, deployment(A100_1_5TB, expert=4))


@pytest.mark.parametrize("gpu_id", ["V100-SXM2-32GB", "T4"])
def test_bf16_on_gpus_without_bf16_tensor_cores(gpu_id: str) -> None:
    arch = catalog_arch("Qwen/Qwen3-0.6B")
    with pytest.raises(UnsupportedPrecision, match="has no bf16 tensor cores"):
        estimate(arch, 1, 16, 16, deployment(catalog_gpu(gpu_id)))


def test_fp8_activations_on_a100() -> None:
    fp8 = Precision(weights=DType.FP8, activations=DType.FP8, kv_cache=DType.FP8)
    with pytest.raises(UnsupportedPrecision, match="no fp8 tensor cores"):
        estimate(
            catalog_arch(LLAMA_8B),
            1,
            16,
            16,
            deployment(catalog_gpu("A100-SXM4-80GB"), precision=fp8),
        )


def test_fp8_activations_with_bf16_weights() -> None:
    mixed = Precision(weights=DType.BF16, activations=DType.FP8)
    with pytest.raises(UnsupportedPrecision, match="use bf16/fp16 activations"):
        estimate(
            catalog_arch(LLAMA_8B),
            1,
            16,
            16,
            deployment(catalog_gpu("H100-SXM5-80GB"), precision=mixed),
        )


def test_405b_on_one_80gb_gpu_needs_sixteen() -> None:
    arch = catalog_arch("meta-llama/Llama-3.1-405B-Instruct")
    with pytest.raises(InsufficientMemory, match="use at least 16 GPUs") as caught:
        estimate(arch, 1, 128, 16, deployment(catalog_gpu("H100-SXM5-80GB")))
    # 405,849,243,648 parameters · 2 B = 811.7 GB; / 80 GB = 10.1 -> 11 -> power of two 16
    assert caught.value.required_gpu_count == 16
    assert caught.value.field == "hardware.count"


def test_a_catalogued_model_of_an_unread_model_type_is_unsupported() -> None:
    record = load_model_catalog().get("stepfun-ai/Step-3.7-Flash")
    with pytest.raises(UnsupportedArchitecture, match="model_type 'step3p7' is not one"):
        record.require_architecture()
