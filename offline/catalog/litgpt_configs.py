"""litgpt's model configs (litgpt/config.py: one dict per checkpoint, with its Hugging Face repo
in `hf_config`), written as the config.json keys transformers reads for the model_type the
architecture is. litgpt names no dtype and no tied embeddings: the dtype is taken as bf16 and the
tied checkpoints are listed in TIED_EMBEDDINGS, each from its own config.json."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from offline.catalog.packages import label
from offline.catalog.published import PublishedConfig

PACKAGE = "litgpt"
_FILE = "litgpt/config.py"
# Repos whose config.json has tie_word_embeddings true (the input embedding is the LM head);
# litgpt copies the embedding into its lm_head on conversion and keeps no flag of its own.
TIED_EMBEDDINGS = re.compile(
    r"^(meta-llama/Llama-3\.2-[13]B.*|Qwen/Qwen2(\.5)?(-Coder|-Math)?-(0\.5|1\.5|3)B.*"
    r"|Qwen/Qwen3-(0\.6|1\.7|4)B.*|HuggingFaceTB/SmolLM.*|allenai/OLMo-1B.*|microsoft/Phi-4-mini.*"
    r"|TinyLlama/.*-1\.1B-.*-3T|keeeeenw/MicroLlama|google/.*)$"
)
# Names of 10B and more give the size within 10% (embeddings are a small share there): a litgpt
# config that misses it has a figure wrong (Platypus2-70B: 64 KV heads, not Llama-2-70B's 8).
NAME_CHECK = (0.10, 10e9)
DTYPE_NOTE = "litgpt records no dtype: bf16 assumed, the dtype current checkpoints ship in"


def load_litgpt_configs(root: Path) -> list[dict[str, Any]]:
    """litgpt's `configs` list, each completed by its own `Config` class (head size, query
    groups, padded vocabulary); config.py is loaded alone, without the torch-importing package."""
    spec = importlib.util.spec_from_file_location("_litgpt_config", root / _FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_litgpt_config"] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
        return [vars(module.Config(**entry)) for entry in module.configs]
    finally:
        del sys.modules["_litgpt_config"]


def model_type_of(c: dict[str, Any]) -> str | None:
    """The transformers model_type whose layers litgpt's fields describe (None: none read)."""
    org = c["hf_config"]["org"]
    mlp, layernorm = c["mlp_class_name"], c["norm_class_name"] == "LayerNorm"
    if c["latent_attention"]:
        return "deepseek_v3"
    if mlp == "LLaMAMoE":
        if org == "allenai":
            return "olmoe"
        if c["norm_qk"]:
            return "qwen3_moe"
        return "qwen2_moe" if c["n_shared_expert"] else "mixtral"
    if mlp == "GemmaMLP":
        if c["rope_local_base_freq"] or c["norm_qk"]:
            return "gemma3_text"
        return "gemma2" if c["post_attention_norm"] else "gemma"
    if mlp == "GptNeoxMLP":
        return {"tiiuae": "falcon", "microsoft": "phi"}.get(org, "gpt_neox")
    if org == "mistralai":
        return "mistral"
    if layernorm:
        return {"allenai": "olmo", "stabilityai": "stablelm"}.get(org)
    if c["norm_qk_type"] == "olmo2":
        return "olmo2"
    if c["norm_qk"]:
        return "qwen3"
    if c["attn_bias"]:
        return "qwen2"
    if org == "microsoft":
        return "phi3"
    return "mistral" if c["sliding_window_size"] else "llama"


def hf_config(c: dict[str, Any], model_type: str) -> dict[str, Any]:
    """The config.json keys of `model_type` that carry litgpt's figures."""
    groups = c["n_query_groups"]
    config: dict[str, Any] = {
        "model_type": model_type,
        "hidden_size": c["n_embd"],
        "num_hidden_layers": c["n_layer"],
        "num_attention_heads": c["n_head"],
        "num_key_value_heads": groups,
        "head_dim": c["head_size"],
        "intermediate_size": c["intermediate_size"],
        "vocab_size": c["padded_vocab_size"],
        "max_position_embeddings": c["block_size"],
        "torch_dtype": "bfloat16",
        "sliding_window": c["sliding_window_size"],
    }
    repo = f"{c['hf_config']['org']}/{c['hf_config']['name']}"
    if TIED_EMBEDDINGS.match(repo):
        config["tie_word_embeddings"] = True
    elif model_type != "falcon":  # FalconConfig ties by default, as every Falcon checkpoint
        config["tie_word_embeddings"] = False
    if model_type == "falcon":
        config |= {"new_decoder_architecture": groups > 1, "num_kv_heads": groups,
                   "multi_query": groups == 1, "parallel_attn": True, "bias": c["bias"],
                   "ffn_hidden_size": c["intermediate_size"]}  # fmt: skip
    if model_type == "stablelm":
        config |= {"use_qkv_bias": c["attn_bias"], "use_parallel_residual": c["parallel_residual"],
                   "partial_rotary_factor": c["rotary_percentage"]}  # fmt: skip
    if model_type == "gpt_neox":
        config |= {"use_parallel_residual": c["parallel_residual"], "attention_bias": c["bias"]}
    if model_type == "gemma3_text":
        indices = c["sliding_window_indices"] or [1]
        config["sliding_window_pattern"] = (indices.index(0) + 1) if 0 in indices else 1
    if model_type in ("mixtral", "olmoe", "qwen2_moe", "qwen3_moe", "deepseek_v3"):
        width = c["moe_intermediate_size"] or c["intermediate_size"]
        experts = c["n_expert"]
        config |= {"num_local_experts": experts, "num_experts": experts,
                   "n_routed_experts": experts, "num_experts_per_tok": c["n_expert_per_token"],
                   "moe_intermediate_size": width}  # fmt: skip
        if model_type in ("mixtral", "olmoe"):
            config["intermediate_size"] = width
        if model_type == "qwen2_moe":
            config["shared_expert_intermediate_size"] = (c["n_shared_expert"] or 0) * width
        if model_type == "deepseek_v3":
            config |= dict(c["latent_attention"])
            config |= {"n_shared_experts": c["n_shared_expert"] or 0,
                       "first_k_dense_replace": c["first_k_dense_replace"] or 0}  # fmt: skip
    return config


def litgpt_configs(root: Path) -> Iterator[PublishedConfig]:
    """Every litgpt config of a model type the reader knows, in litgpt's order."""
    for c in load_litgpt_configs(root):
        model_type = model_type_of(c)
        if model_type is None:
            continue
        repo_id = f"{c['hf_config']['org']}/{c['hf_config']['name']}"
        source = (
            f"{label(PACKAGE)}: {_FILE} config {c['name']!r} (litgpt's fields written as "
            f"{model_type} config.json keys)"
        )
        config = hf_config(c, model_type)
        yield PublishedConfig(repo_id, config, source, False, (DTYPE_NOTE,), NAME_CHECK)
