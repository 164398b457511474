"""Llama 3.2 Vision (mllama): a text-only request runs the self-attention layers; the
cross-attention layers, which attend to image tokens, are skipped by the engines but hold
weights. The config read reproduces the catalogue entry, the counts are worked out by hand, and
the model quotes through the one pricing path."""

from __future__ import annotations

from typing import Any

from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.memory import active_parameter_count, parameter_count
from tests.catalog.hf_config_support import priced_documents

# https://huggingface.co/meta-llama/Llama-3.2-11B-Vision/blob/main/config.json, its text_config
# (the vision_config, which the text decoder's pricing does not read, left out)
LLAMA_32_11B_VISION: dict[str, Any] = {
    "architectures": ["MllamaForConditionalGeneration"],
    "model_type": "mllama",
    "image_token_index": 128256,
    "text_config": {
        "model_type": "mllama_text_model",
        "hidden_size": 4096,
        "num_hidden_layers": 40,
        "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "hidden_act": "silu",
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "torch_dtype": "bfloat16",
}
ELEVEN_B = "meta-llama/Llama-3.2-11B-Vision"
# One layer of either kind: q and o 4096 x 4096, k and v 4096 x 1024, a gated 14336 MLP.
LAYER = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336


def test_config_reads_as_the_catalogue_entry() -> None:
    read = read_config(LLAMA_32_11B_VISION)
    record = load_model_catalog().get(ELEVEN_B)
    assert read.architecture == record.require_architecture()
    assert read.published_precision is record.published_precision
    arch = read.architecture
    assert (arch.num_layers, arch.num_cross_attention_layers) == (32, 8)


def test_parameters_by_hand() -> None:
    """40 layers of weights (32 self-attention, 8 cross-attention) and untied 128256 x 4096
    tables; a text token passes through the 32. The model card's 10.6B adds the vision encoder
    and projector (about 0.85B), which the text decoder's count leaves out."""
    tables = 2 * 128256 * 4096
    arch = read_config(LLAMA_32_11B_VISION).architecture
    assert parameter_count(arch) == 40 * LAYER + tables == 9_774_825_472
    assert active_parameter_count(arch) == 32 * LAYER + tables
    assert 0.7e9 < 10.6e9 - parameter_count(arch) < 1.0e9


def test_vision_models_are_quoted() -> None:
    """By name (11B on one H200, 90B on two) and the 11B by its config.json, alike."""
    workload = {"batch_size": 4, "prompt_tokens": 900, "output_tokens": 200}

    def request(named: dict[str, Any], count: int) -> dict[str, Any]:
        hardware = {"gpu": "H200-SXM-141GB", "count": count}
        return {**named, "workload": workload, "hardware": hardware, "datacenter": {"region": "FR"}}

    documents = priced_documents(
        [
            request({"model": ELEVEN_B}, 1),
            request({"architecture": LLAMA_32_11B_VISION}, 1),
            request({"model": "meta-llama/Llama-3.2-90B-Vision-Instruct"}, 2),
        ]
    )
    assert documents[0]["energy"] == documents[1]["energy"]
    assert all(d["energy"]["gpu_j"] > 0 and d["latency"]["total_s"] > 0 for d in documents)
