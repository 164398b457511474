"""Each engine's token budget per forward pass, as its defaults set it (prefill_budget.py)."""

from __future__ import annotations

import pytest

from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.prefill_budget import prefill_budget_tokens

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # max_position_embeddings 131,072


@pytest.mark.parametrize(
    ("engine", "gpu", "tokens"),
    [
        ("vllm-v1", "H100-SXM5-80GB", 8192),  # >= 70 GiB and not an A100
        ("vllm", "H200-SXM-141GB", 8192),
        ("vllm-v1", "A100-SXM4-80GB", 2048),  # the A100 exception (vLLM PR #17885)
        ("vllm-v1", "A100-SXM4-40GB", 2048),
        ("vllm-v1", "L40S", 2048),  # 48 GB: under 70 GiB
        ("sglang", "A100-SXM4-40GB", 8192),  # 35-160 GiB
        ("sglang", "L40S", 8192),
        ("trtllm", "H100-SXM5-80GB", 8192),
        ("vllm-v0", "A100-SXM4-40GB", 131_072),  # whole prompts, up to the context
    ],
)
def test_budget_per_engine_and_gpu(engine: str, gpu: str, tokens: int) -> None:
    arch = load_model_catalog().get(LLAMA).require_architecture()
    spec = load_gpu_catalog().get(gpu).spec
    assert prefill_budget_tokens(engine, arch, spec) == tokens
