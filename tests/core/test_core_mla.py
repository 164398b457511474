"""DeepSeek multi-head latent attention: one 576-element latent per token and layer."""

from __future__ import annotations

from core_support import catalog_arch, catalog_gpu, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.results import RequestEstimate

# DeepSeek-V3: 61 layers; cached latent kv_lora_rank 512 + rope 64 = 576 elements, bf16 here
LATENT_BYTES = 61 * 576 * 2  # 70,272 B per token
PROMPT, OUTPUT = 64, 5  # decode contexts 65..68, Σc = 266


def deepseek(flash: bool) -> RequestEstimate:
    dep = deployment(catalog_gpu("H200-SXM-141GB"), flash=flash)
    return estimate(
        catalog_arch("deepseek-ai/DeepSeek-V3"), 1, PROMPT, OUTPUT, dep, check_memory=False
    )


def test_kv_cache_footprint_is_the_latent() -> None:
    # 69 tokens · 70,272 B = 4,848,768 B
    assert_allclose(deepseek(True).memory.kv_cache_bytes_per_gpu, 4_848_768, rtol=1e-12)


def test_unfused_scores_read_the_latent_once_per_step() -> None:
    # 70,272 B · 266 = 18,692,352 B
    reads = column_sum(deepseek(False).decode, "kv_cache_read_bytes", {"attention_scores"})
    assert_allclose(reads, 18_692_352, rtol=1e-12)


def test_fused_decode_reads_the_latent_once_per_step() -> None:
    reads = column_sum(deepseek(True).decode, "kv_cache_read_bytes", {"attention"})
    assert_allclose(reads, 18_692_352, rtol=1e-12)  # 70,272 B · 266, not 2 x that
