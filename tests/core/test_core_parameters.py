"""Seed 004: parameter counts under the weight-matrix accounting (no norms, no biases)."""

from __future__ import annotations

import dataclasses

from core_support import catalog_arch

from service.core.architecture import ModelArchitecture
from service.core.memory import parameter_count

GPT3_175B = ModelArchitecture(
    hidden_size=12288,
    num_layers=96,
    num_attention_heads=96,
    num_key_value_heads=96,
    head_dim=128,
    intermediate_size=4 * 12288,
    vocab_size=50257,
    max_context_tokens=2048,
    mlp="plain",
    activation="gelu",
    norm="layernorm",
    position="learned",
    tie_word_embeddings=False,
)


def test_gpt3_175b() -> None:
    # 12·L·H² = 12·96·150,994,944 = 173,946,175,488; 2·V·H = 2·50257·12288 = 1,235,116,032
    assert parameter_count(GPT3_175B) == 175_181_291_520


def test_tied_embeddings_count_one_table() -> None:
    tied = dataclasses.replace(GPT3_175B, tie_word_embeddings=True)
    # one table fewer: 175,181,291,520 - 50257·12288 = 174,563,733,504
    assert parameter_count(tied) == 174_563_733_504


def test_llama_3_1_405b() -> None:
    arch = catalog_arch("meta-llama/Llama-3.1-405B-Instruct")  # H 16384, 126 layers, GQA 128/8
    # attention 16384·(16384 + 2·1024) + 16384² = 570,425,344; MLP 3·16384·53248 = 2,617,245,696
    # 126·3,187,671,040 = 401,646,551,040; tables 2·128256·16384 = 4,202,692,608
    assert parameter_count(arch) == 405_849_243_648
