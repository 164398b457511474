"""A repo id that names a fine-tune, dated release or quantisation of a catalogued model finds
that model, under its own organisation or another; the quantisation suffix names the weights'
precision. Ids that are other models find nothing."""

from __future__ import annotations

import pytest

from service.catalog.models import UnknownModel, load_model_catalog
from service.core.dtypes import DType

L8, L70 = "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"
Q30_2507 = "Qwen/Qwen3-30B-A3B-Instruct-2507"


@pytest.mark.parametrize(
    ("requested", "base", "weights"),
    [
        ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", Q30_2507, DType.FP8),
        ("unsloth/Qwen3-30B-A3B-Instruct-2507-bnb-4bit", Q30_2507, DType.INT4),
        ("Qwen/Qwen3-235B-A22B-Thinking", "Qwen/Qwen3-235B-A22B", None),
        ("Qwen/Qwen3-32B-AWQ", "Qwen/Qwen3-32B", DType.INT4),
        ("Qwen/Qwen3-8B-GPTQ-Int8", "Qwen/Qwen3-8B", DType.INT8),
        ("Qwen/Qwen3-32B-Base", "Qwen/Qwen3-32B", None),
        ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", L70, DType.INT4),
        ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "meta-llama/Llama-3.3-70B-Instruct",
         DType.FP8),
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", L8, DType.INT8),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-W4A16", L8, DType.INT4),
        ("nvidia/Llama-3.1-8B-Instruct-NVFP4", L8, DType.NVFP4),
        ("openai/gpt-oss-20b-MXFP4", "openai/gpt-oss-20b", DType.MXFP4),
        # an alias of a catalogued fp8 entry under another organisation: that entry as it is
        ("RedHatAI/Meta-Llama-3.1-405B-Instruct-FP8", "meta-llama/Llama-3.1-405B-Instruct-FP8",
         None),
        ("google/gemma-2-9b-it-GGUF", "google/gemma-2-9b-it", None),
        # different models whose names share a prefix with a catalogued one
        ("Qwen/Qwen3-Coder-Next", None, None),
        ("mistralai/Mistral-7B-Instruct-v0.4", None, None),
        ("Qwen/Qwen3-30B", None, None),
    ],
)  # fmt: skip
def test_variant_finds_its_base(requested: str, base: str | None, weights: DType | None) -> None:
    catalog = load_model_catalog()
    if base is None:
        with pytest.raises(UnknownModel):
            catalog.find(requested)
        return
    record, variant = catalog.find(requested)
    assert record.id == base
    assert variant is not None and variant.base_id == base
    assert variant.weights is weights


def test_a_catalogued_id_is_no_variant() -> None:
    record, variant = load_model_catalog().find("qwen/qwen3-235b-a22b-thinking-2507-fp8")
    assert record.id == "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8" and variant is None
    # DeepSeek-V3.1 shares V3's prefix but is catalogued itself, not read as V3
    record, variant = load_model_catalog().find("deepseek-ai/DeepSeek-V3.1")
    assert record.id == "deepseek-ai/DeepSeek-V3.1" and variant is None
    # Qwen3-Coder-30B-A3B-Instruct shares Qwen3-30B-A3B's shape but is its own entry
    record, variant = load_model_catalog().find("Qwen/Qwen3-Coder-30B-A3B-Instruct")
    assert record.id == "Qwen/Qwen3-Coder-30B-A3B-Instruct" and variant is None


@pytest.mark.parametrize(
    "repo_id", [Q30_2507, "Qwen/Qwen3-30B-A3B-Thinking-2507", "Qwen/Qwen3-8B-Base",
                "mistralai/Mistral-7B-Instruct-v0.2"]
)  # fmt: skip
def test_releases_built_from_their_own_config_are_entries(repo_id: str) -> None:
    """Dated releases and base checkpoints the published configs name are entries of their
    own (the build's), not variants of a sibling."""
    record, variant = load_model_catalog().find(repo_id)
    assert record.id == repo_id and variant is None


def test_formats_not_priced_as_such_are_noted() -> None:
    _, nvfp4 = load_model_catalog().find("nvidia/Llama-3.1-8B-Instruct-NVFP4")
    assert nvfp4 is not None and nvfp4.notes == ()  # NVFP4 is priced as itself
    _, gguf = load_model_catalog().find("google/gemma-2-9b-it-GGUF")
    assert gguf is not None and gguf.weights is None
    assert gguf.notes == ("GGUF (llama.cpp) quantisations are not priced",)
