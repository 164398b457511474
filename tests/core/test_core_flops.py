"""Tensor-core FLOP counts against the textbook formulas (seed 003, and 2N per token)."""

from __future__ import annotations

import pytest
from core_support import A100_1_5TB, catalog_arch, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.architecture import ModelArchitecture, PositionKind

H, B, S, L = 4096, 2, 1024, 4
LAYER_GEMMS = {"qkv_proj", "o_proj", "up_proj", "down_proj"}
UNFUSED_ATTENTION = {"attention_scores", "attention_context"}


def plain_mha(position: PositionKind) -> ModelArchitecture:
    """GPT-style layer: 32 heads of 128 (= H), no GQA, plain 4H GELU MLP."""
    return ModelArchitecture(
        hidden_size=H,
        num_layers=L,
        num_attention_heads=32,
        num_key_value_heads=32,
        head_dim=128,
        intermediate_size=4 * H,
        vocab_size=32000,
        mlp="plain",
        activation="gelu",
        norm="layernorm",
        position=position,
    )


@pytest.mark.parametrize("position", ["rope", "learned"])
def test_prefill_layer_flops_unfused_attention(position: PositionKind) -> None:
    prefill = estimate(plain_mha(position), B, S, 1, deployment(A100_1_5TB, flash=False)).prefill
    per_layer = column_sum(prefill, "tensor_flops", LAYER_GEMMS | UNFUSED_ATTENTION) / L
    # GEMMs: 2BS(3H² + H² + 4H² + 4H²) = 24·B·S·H² = 24·2048·4096² = 824,633,720,832
    # QKᵀ and PV over the full SxS square: 2·2BS²H = 4·2·1024²·4096 = 34,359,738,368
    assert_allclose(per_layer, 824_633_720_832 + 34_359_738_368, rtol=1e-12)


def test_prefill_layer_flops_flash_attention_is_causal() -> None:
    prefill = estimate(plain_mha("rope"), B, S, 1, deployment(A100_1_5TB)).prefill
    per_layer = column_sum(prefill, "tensor_flops", LAYER_GEMMS | {"attention"}) / L
    # causal pairs S(S+1)/2 = 524,800 per head: 4·B·H·524,800 = 32768·524,800 = 17,196,646,400
    assert_allclose(per_layer, 824_633_720_832 + 17_196_646_400, rtol=1e-12)


def test_only_gemms_attention_and_lm_head_use_tensor_cores() -> None:
    prefill = estimate(plain_mha("rope"), B, S, 1, deployment(A100_1_5TB, flash=False)).prefill
    on_tensor_cores = {k.name for k in prefill.kernels if k.tensor_flops > 0}
    assert on_tensor_cores == LAYER_GEMMS | UNFUSED_ATTENTION | {"lm_head"}
    # LM head on the last position of each sequence only: 2·B·H·V = 2·2·4096·32000
    assert_allclose(column_sum(prefill, "tensor_flops", {"lm_head"}), 524_288_000, rtol=1e-12)


def test_decode_flops_per_token_are_twice_the_parameters() -> None:
    arch = catalog_arch("meta-llama/Llama-2-7b-hf")  # H 4096, 32 layers, FFN 11008, V 32000
    batch, prompt, outputs = 4, 16, 9
    decode = estimate(arch, batch, prompt, outputs, deployment(A100_1_5TB)).decode
    per_token = column_sum(decode, "tensor_flops") / (batch * (outputs - 1))
    # N without the input embedding: 32·(4·4096² + 3·4096·11008) + 4096·32000
    #   = 32·202,375,168 + 131,072,000 = 6,607,077,376  ->  2N = 13,214,154,752
    two_n = 13_214_154_752
    assert_allclose(per_token, two_n, rtol=0.02)
    # Exactly: plus QKᵀ and PV, 4·c·H per layer at context c = 17..24 (mean 20.5):
    #   4·20.5·4096·32 = 10,747,904
    assert_allclose(per_token, two_n + 10_747_904, rtol=1e-12)
