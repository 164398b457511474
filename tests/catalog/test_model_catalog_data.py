"""Structural checks on service/catalog/data/models.json (pure json + pytest, no project imports).

Besides schema and sanity checks, the parameter count of each supported model is recomputed from
its architecture (embeddings + attention + MLP/experts + norms + lm head unless tied) and compared
with the published count: this catches typos in layer counts, widths, vocab sizes and MoE shapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

CATALOG_PATH = Path(__file__).resolve().parents[2] / "service" / "catalog" / "data" / "models.json"

PRECISIONS = {"fp32", "bf16", "fp16", "fp8", "int8", "int4", "mxfp4", "nvfp4"}
ENTRY_KEYS = {
    "id",
    "aliases",
    "family",
    "series",
    "supported",
    "unsupported_reason",
    "published_precision",
    "parameters",
    "active_parameters",
    "architecture",
    "notes",
    "sources",
}
ARCH_KEYS = {
    "hidden_size",
    "num_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_context_tokens",
    "mlp",
    "activation",
    "norm",
    "position",
    "attention",
    "qkv_bias",
    "parallel_residual",
    "tie_word_embeddings",
    "sliding_window_tokens",
    "num_sliding_window_layers",
    "num_experts",
    "experts_per_token",
    "moe_intermediate_size",
    "num_moe_layers",
    "num_shared_experts",
    "shared_expert_intermediate_size",
    "mla",
    "fp8_block_scaled",
    "sandwich_norms",
    "norm_unit_offset",
}
MLA_KEYS = {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}
ENUMS = {
    "mlp": {"gated", "plain"},
    "activation": {"silu", "gelu", "relu"},
    "norm": {"rmsnorm", "layernorm"},
    "position": {"rope", "alibi", "learned", "none"},  # none: Nemotron-H (no positional code)
    "attention": {"mha", "gqa", "mqa", "mla"},
}
# Fields the catalogue build writes for every entry it reads (the state-space and linear-attention
# mixers of service.core.mixers, DSA's indexer, AWQ/GPTQ's group size), absent from the
# hand-made entries.
BUILT_ARCH_KEYS = {
    "dsa",
    "int4_group_size",
    "mamba",
    "delta_net",
    "num_mamba_layers",
    "num_delta_net_layers",
    "num_mixer_free_layers",
    "num_mlp_free_layers",
    "parallel_mixers",
    "attention_output_gate",
    "moe_latent_size",
    "num_cross_attention_layers",
    "v_head_dim",
    "values_from_keys",
    "sliding_attention",
}

BOOL_ARCH_KEYS = (
    "qkv_bias",
    "parallel_residual",
    "tie_word_embeddings",
    "fp8_block_scaled",
    "sandwich_norms",
    "norm_unit_offset",
)

# Every model id named in the shared measurement data (ML.ENERGY v2 and v3, Splitwise, Vidur).
SHARED_DATA_IDS = [
    # ML.ENERGY v2
    "bigcode/starcoder2-15b",
    "bigcode/starcoder2-3b",
    "bigcode/starcoder2-7b",
    "codellama/CodeLlama-13b-hf",
    "codellama/CodeLlama-34b-hf",
    "codellama/CodeLlama-70b-hf",
    "codellama/CodeLlama-7b-hf",
    "facebook/chameleon-30b",
    "facebook/chameleon-7b",
    "google/codegemma-1.1-2b",
    "google/codegemma-7b",
    "google/gemma-2-27b-it",
    "google/gemma-2-2b-it",
    "google/gemma-2-9b-it",
    "llava-hf/llama3-llava-next-8b-hf",
    "llava-hf/llava-1.5-13b-hf",
    "llava-hf/llava-1.5-7b-hf",
    "meta-llama/Meta-Llama-3.1-405B-Instruct",
    "meta-llama/Meta-Llama-3.1-70B-Instruct",
    "meta-llama/Meta-Llama-3.1-8B-Instruct",
    "microsoft/Phi-3-medium-4k-instruct",
    "microsoft/Phi-3-mini-4k-instruct",
    "microsoft/Phi-3-small-8k-instruct",
    "microsoft/Phi-3-vision-128k-instruct",
    "mistralai/Mistral-7B-Instruct-v0.3",
    "mistralai/Mistral-Large-Instruct-2407",
    "mistralai/Mistral-Nemo-Instruct-2407",
    "mistralai/Mixtral-8x22B-Instruct-v0.1",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    # ML.ENERGY v3 (H100)
    "Qwen/Qwen3-14B",
    "Qwen/Qwen3-235B-A22B-Instruct-2507",
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
    "Qwen/Qwen3-235B-A22B-Thinking-2507",
    "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8",
    "Qwen/Qwen3-8B",
    "google/gemma-3-12b-it",
    "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "nvidia/NVIDIA-Nemotron-Nano-12B-v2",
    "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
    "openai/gpt-oss-120b",
    "openai/gpt-oss-20b",
    # Splitwise (llama2-70b, bloom-176b)
    "meta-llama/Llama-2-70b-hf",
    "bigscience/bloom",
    # Vidur profiling and model configs
    "Qwen/Qwen-72B",
    "codellama/CodeLlama-34b-Instruct-hf",
    "internlm/internlm-20b",
    "internlm/internlm2-20b",
    "meta-llama/Llama-2-7b-hf",
    "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Meta-Llama-3-70B",
    "microsoft/phi-2",
]

LLMCO2_IDS = [
    "bigscience/bloom-560m",
    "bigscience/bloom-1b1",
    "bigscience/bloom-1b7",
    "bigscience/bloom-3b",
    "bigscience/bloom-7b1",
    "google/gemma-2b",
    "google/gemma-7b",
    "google/gemma-2-2b",
    "google/gemma-2-9b",
    "google/gemma-2-27b",
    "Qwen/Qwen2-0.5B",
    "Qwen/Qwen2-1.5B",
    "Qwen/Qwen2-7B",
    "Qwen/Qwen2-72B",
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "mistralai/Mixtral-8x7B-v0.1",
]

OTHER_REQUIRED_IDS = [
    "meta-llama/Llama-2-7b-hf",
    "meta-llama/Llama-2-13b-hf",
    "meta-llama/Llama-2-70b-hf",
    "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Meta-Llama-3-70B",
    "mistralai/Mistral-7B-v0.1",
    "Qwen/Qwen1.5-7B",
    "Deci/DeciLM-7B",
    "EleutherAI/gpt-j-6b",
    "facebook/opt-6.7b",
    "huggyllama/llama-7b",
    "BAAI/Aquila-7B",
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "Qwen/Qwen3-Coder-480B-A35B-Instruct",
    "meta-llama/Llama-3.1-405B",
    "meta-llama/Llama-3.1-405B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
    "google/gemma-3-12b-it",
    "google/gemma-3-27b-it",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-R1",
]

# Ids that must resolve to a real entry (not just an alias) because their precision differs from
# the bf16 twin.
MUST_BE_OWN_ENTRY = [
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
]

# Published total parameter counts (model cards / papers), independent of the catalogue's own
# "parameters" field: (id, published total, published active or None).
PUBLISHED_COUNTS = [
    ("meta-llama/Llama-3.1-8B", 8.03e9, None),
    ("meta-llama/Llama-2-70b-hf", 68.98e9, None),
    ("meta-llama/Llama-3.1-405B", 405.85e9, None),
    ("mistralai/Mixtral-8x7B-v0.1", 46.7e9, 12.9e9),
    ("mistralai/Mistral-7B-v0.1", 7.24e9, None),
    ("Qwen/Qwen3-235B-A22B", 235e9, 22e9),
    ("Qwen/Qwen3-30B-A3B", 30.5e9, 3.3e9),
    ("Qwen/Qwen2-72B", 72.7e9, None),
    ("Qwen/Qwen2-0.5B", 0.494e9, None),
    ("bigscience/bloom", 176e9, None),
    ("bigscience/bloom-560m", 0.559e9, None),
    ("openai/gpt-oss-120b", 117e9, 5.1e9),
    ("openai/gpt-oss-20b", 21e9, 3.6e9),
    ("google/gemma-2-9b", 9.24e9, None),
    ("google/gemma-7b", 8.54e9, None),
    ("deepseek-ai/DeepSeek-V3", 671e9, 37e9),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400e9, 17e9),
    ("EleutherAI/gpt-j-6b", 6.05e9, None),
    ("facebook/opt-6.7b", 6.66e9, None),
    ("microsoft/phi-2", 2.78e9, None),
    ("bigcode/starcoder2-15b", 15.96e9, None),
    ("Deci/DeciLM-7B", 7.04e9, None),
]

TOLERANCE = 0.03


@pytest.fixture(scope="module")
def catalog() -> dict[str, Any]:
    with CATALOG_PATH.open(encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def models(catalog: dict[str, Any]) -> list[dict[str, Any]]:
    return catalog["models"]


@pytest.fixture(scope="module")
def lookup(models: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for m in models:
        table[m["id"]] = m
        for alias in m["aliases"]:
            table[alias] = m
    return table


def _is_pos_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# ----------------------------------------------------------------------------------------------
# parameter formula


def count_parameters(
    a: dict[str, Any], *, active: bool = False, include_input_embedding: bool = True
) -> float:
    """Weights implied by an architecture entry.

    embeddings (+ learned positions) + per-layer attention + dense MLP or experts (+ shared
    experts, router) + norms + lm head unless tied. With active=True only experts_per_token
    routed experts count per MoE layer.
    """
    h = a["hidden_size"]
    n_layers = a["num_layers"]
    heads = a["num_attention_heads"]
    kv = a["num_key_value_heads"]
    hd = a["head_dim"]
    vocab = a["vocab_size"]

    total = 0.0
    if include_input_embedding:
        total += vocab * h
    if not a["tie_word_embeddings"] or not include_input_embedding:
        total += vocab * h  # lm head
    if a["position"] == "learned":
        total += (a["max_context_tokens"] + 2) * h

    if a["attention"] == "mla":
        m = a["mla"]
        qk = m["qk_nope_head_dim"] + m["qk_rope_head_dim"]
        if m["q_lora_rank"]:
            q = h * m["q_lora_rank"] + m["q_lora_rank"] * heads * qk
        else:
            q = h * heads * qk
        kv_a = h * (m["kv_lora_rank"] + m["qk_rope_head_dim"])
        kv_b = m["kv_lora_rank"] * heads * (m["qk_nope_head_dim"] + m["v_head_dim"])
        o = heads * m["v_head_dim"] * h
        attn = q + kv_a + kv_b + o
    else:
        vd = a.get("v_head_dim") or hd
        values = 0 if a.get("values_from_keys") else h * kv * vd  # Gemma 4: keys as values
        attn = h * heads * hd + h * kv * hd + values + heads * vd * h
        if a["qkv_bias"]:
            attn += heads * hd + 2 * kv * hd
    # NAS blocks without attention (Nemotron-Super-49B's no_op attention) hold none
    total += (n_layers - a.get("num_mixer_free_layers", 0)) * attn
    if a.get("sliding_attention"):  # sliding layers of their own shape (Gemma 4, MiMo-V2)
        s = a["sliding_attention"]
        sq, skv = s["num_attention_heads"] * s["head_dim"], s["num_key_value_heads"]
        own = h * sq + h * skv * (s["head_dim"] + s["v_head_dim"])
        own += s["num_attention_heads"] * s["v_head_dim"] * h
        total += a["num_sliding_window_layers"] * (own - attn)

    mats = 3 if a["mlp"] == "gated" else 2
    moe_layers = a["num_moe_layers"]
    # NAS blocks without an FFN (Nemotron-Ultra-253B's no_op FFNs) hold none
    dense_layers = n_layers - moe_layers - a.get("num_mlp_free_layers", 0)
    total += dense_layers * mats * h * a["intermediate_size"]
    if moe_layers:
        routed = a["experts_per_token"] if active else a["num_experts"]
        per_layer = routed * mats * h * a["moe_intermediate_size"] + h * a["num_experts"]
        if a["num_shared_experts"]:
            per_layer += a["num_shared_experts"] * mats * h * a["shared_expert_intermediate_size"]
        total += moe_layers * per_layer

    norm_weights = 2 if a["norm"] == "layernorm" else 1  # layernorm has a bias
    norms_per_layer = 4 if a["sandwich_norms"] else 2
    total += (norms_per_layer * n_layers + 1) * h * norm_weights
    cross = 0 if active else a.get("num_cross_attention_layers", 0)
    # Llama 3.2 Vision's cross-attention layers: a self-attention layer's weights and norms
    total += cross * (attn + mats * h * a["intermediate_size"] + 2 * h * norm_weights)
    return total


# ----------------------------------------------------------------------------------------------
# top level and identity


def test_top_level(catalog: dict[str, Any]) -> None:
    assert catalog["catalog"] == "models"
    assert isinstance(catalog["version"], str) and catalog["version"]
    assert isinstance(catalog["notes"], str) and catalog["notes"]
    assert isinstance(catalog["models"], list) and len(catalog["models"]) >= 60


def test_ids_unique(models: list[dict[str, Any]]) -> None:
    ids = [m["id"] for m in models]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, dupes


def test_aliases_unique_and_disjoint_from_ids(models: list[dict[str, Any]]) -> None:
    ids = {m["id"] for m in models}
    seen: dict[str, str] = {}
    for m in models:
        assert isinstance(m["aliases"], list)
        for alias in m["aliases"]:
            assert isinstance(alias, str) and "/" in alias, (m["id"], alias)
            assert alias not in ids, f"alias {alias} of {m['id']} is also an id"
            assert alias not in seen, f"alias {alias} on both {seen[alias]} and {m['id']}"
            seen[alias] = m["id"]


def test_ids_look_like_hf_repos(models: list[dict[str, Any]]) -> None:
    for m in models:
        org, _, name = m["id"].partition("/")
        assert org and name and "/" not in name and " " not in m["id"], m["id"]


@pytest.mark.parametrize("model_id", sorted(set(SHARED_DATA_IDS)))
def test_shared_data_models_present(lookup: dict[str, dict[str, Any]], model_id: str) -> None:
    assert model_id in lookup, f"{model_id} (named in /shared/data) missing from catalogue"


@pytest.mark.parametrize("model_id", sorted(set(LLMCO2_IDS + OTHER_REQUIRED_IDS)))
def test_required_models_present(lookup: dict[str, dict[str, Any]], model_id: str) -> None:
    assert model_id in lookup, f"{model_id} missing from catalogue"


@pytest.mark.parametrize("model_id", MUST_BE_OWN_ENTRY)
def test_fp8_repos_are_own_entries(models: list[dict[str, Any]], model_id: str) -> None:
    entry = next((m for m in models if m["id"] == model_id), None)
    assert entry is not None, f"{model_id} must be an id, not an alias"
    assert entry["published_precision"] == "fp8"


def test_quantised_repo_names_match_precision(lookup: dict[str, dict[str, Any]]) -> None:
    for key, m in lookup.items():
        if key.endswith("-FP8"):
            assert m["published_precision"] == "fp8", key
    assert lookup["openai/gpt-oss-120b"]["published_precision"] == "mxfp4"
    assert lookup["openai/gpt-oss-20b"]["published_precision"] == "mxfp4"


# ----------------------------------------------------------------------------------------------
# entry fields


def test_entry_fields(models: list[dict[str, Any]]) -> None:
    for m in models:
        mid = m["id"]
        assert set(m) >= ENTRY_KEYS, (mid, ENTRY_KEYS - set(m))
        assert isinstance(m["family"], str) and m["family"] == m["family"].lower(), mid
        assert m["family"].strip() and " " not in m["family"], mid
        assert isinstance(m["series"], str) and m["series"].strip(), mid
        assert isinstance(m["supported"], bool), mid
        assert m["published_precision"] in PRECISIONS, mid
        if m["parameters"] is None:  # an architecture the build cannot count, said so
            assert not m["supported"] and m["active_parameters"] is None, mid
            assert m["sources"]["parameters"].startswith("not counted"), mid
        else:
            assert _is_num(m["parameters"]) and m["parameters"] > 1e7, mid  # pythia-14m: 14.06M
            assert _is_num(m["active_parameters"]), mid
            assert 0 < m["active_parameters"] <= m["parameters"], mid
        assert isinstance(m["notes"], list), mid
        assert all(isinstance(n, str) and n for n in m["notes"]), mid
        src = m["sources"]
        assert isinstance(src, dict), mid
        for key in ("architecture", "published_precision"):
            assert isinstance(src.get(key), str) and src[key].strip(), (mid, key)


def test_supported_vs_unsupported(models: list[dict[str, Any]]) -> None:
    for m in models:
        if m["supported"]:
            assert m["unsupported_reason"] is None, m["id"]
            assert isinstance(m["architecture"], dict), m["id"]
            assert f"https://huggingface.co/{m['id']}" in m["sources"]["architecture"], m["id"]
        else:
            assert isinstance(m["unsupported_reason"], str) and m["unsupported_reason"], m["id"]
            assert m["architecture"] is None, f"{m['id']}: no guessed architecture for unsupported"


# (id, Mamba-2 blocks, attention blocks, MLP blocks, model card size): the blocks counted by
# hand from each config.json's hybrid_override_pattern (M, *, -); 4 and 6 attention layers as
# the Nemotron Nano 2 report (arXiv 2508.14444) describes them.
NEMOTRON_NANO_V2 = [
    ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", 27, 4, 25, 9e9),
    ("nvidia/NVIDIA-Nemotron-Nano-12B-v2", 28, 6, 28, 12e9),
]


@pytest.mark.parametrize(("mid", "mamba", "attention", "mlp", "card"), NEMOTRON_NANO_V2)
def test_hybrid_mamba_models_are_priced_from_their_pattern(
    lookup: dict[str, dict[str, Any]], mid: str, mamba: int, attention: int, mlp: int, card: float
) -> None:
    entry = lookup[mid]
    a = entry["architecture"]
    assert entry["supported"] is True
    assert a["num_layers"] == mamba + attention + mlp
    assert a["num_mamba_layers"] == mamba
    assert a["num_mixer_free_layers"] == mlp  # MLP blocks: no mixer
    assert a["num_mlp_free_layers"] == mamba + attention  # mixer blocks: no MLP
    assert abs(entry["parameters"] / card - 1.0) < 0.03


def test_moe_entries_have_fewer_active_parameters(models: list[dict[str, Any]]) -> None:
    for m in models:
        a = m["architecture"]
        if a and (a["num_experts"] or a.get("num_cross_attention_layers")):
            # routed experts idle but k; cross-attention layers idle for a text token
            assert m["active_parameters"] < m["parameters"], m["id"]
        elif a:
            assert m["active_parameters"] == m["parameters"], m["id"]


# ----------------------------------------------------------------------------------------------
# architecture sanity


def _supported(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in models if m["supported"]]


def test_architecture_keys_and_types(models: list[dict[str, Any]]) -> None:
    for m in _supported(models):
        a = m["architecture"]
        mid = m["id"]
        assert set(a) - BUILT_ARCH_KEYS == ARCH_KEYS, (mid, set(a) ^ ARCH_KEYS)
        for key in (
            "hidden_size",
            "num_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
            "max_context_tokens",
        ):
            assert _is_pos_int(a[key]), (mid, key, a[key])
        for key, allowed in ENUMS.items():
            assert a[key] in allowed, (mid, key, a[key])
        for key in BOOL_ARCH_KEYS:
            assert isinstance(a[key], bool), (mid, key)
        assert a.get("moe_latent_size") is None or _is_pos_int(a["moe_latent_size"]), mid
        for key in (
            "num_sliding_window_layers",
            "num_experts",
            "experts_per_token",
            "num_moe_layers",
            "num_shared_experts",
        ):
            assert isinstance(a[key], int) and not isinstance(a[key], bool) and a[key] >= 0, (
                mid,
                key,
            )


def test_architecture_ranges(models: list[dict[str, Any]]) -> None:
    for m in _supported(models):
        a = m["architecture"]
        mid = m["id"]
        assert 128 <= a["hidden_size"] <= 65536, mid  # pythia-14m: 128
        assert 1 <= a["num_layers"] <= 256, mid
        if a.get("num_mamba_layers", 0) < a["num_layers"]:  # an all-Mamba model has no heads
            assert 32 <= a["head_dim"] <= 512, mid
        assert 1000 <= a["vocab_size"] <= 600_000, mid
        assert 512 <= a["max_context_tokens"] <= 20_000_000, mid  # pythia-14m: 512
        assert a["intermediate_size"] >= a["hidden_size"] // 2, mid


def test_heads_and_head_dim(models: list[dict[str, Any]]) -> None:
    for m in _supported(models):
        a = m["architecture"]
        mid = m["id"]
        heads, kv, hd, h = (
            a["num_attention_heads"],
            a["num_key_value_heads"],
            a["head_dim"],
            a["hidden_size"],
        )
        assert heads % kv == 0, (mid, heads, kv)
        if a["attention"] == "mla":
            continue
        # hidden == heads * head_dim, or head_dim given explicitly (Gemma, Qwen3, Nemo,
        # gpt-oss): an explicit head_dim still has to be a plausible projection width.
        # Up to 3.1: Gemma 4 31B's full layers project 5376 to 32 heads of 512 (3.05; its
        # config.json's global_head_dim).
        if heads * hd != h:
            assert 0.5 <= heads * hd / h <= 3.1, (mid, heads, hd, h)


def test_attention_kind_matches_heads(models: list[dict[str, Any]]) -> None:
    for m in _supported(models):
        a = m["architecture"]
        mid = m["id"]
        heads, kv = a["num_attention_heads"], a["num_key_value_heads"]
        if a["attention"] == "mla":
            assert isinstance(a["mla"], dict) and set(a["mla"]) == MLA_KEYS, mid
            assert all(isinstance(v, int) and v >= 0 for v in a["mla"].values()), mid
            assert a["mla"]["kv_lora_rank"] > 0 and a["mla"]["v_head_dim"] > 0, mid
            assert a["head_dim"] == a["mla"]["qk_nope_head_dim"] + a["mla"]["qk_rope_head_dim"]
            continue
        assert a["mla"] is None, mid
        expected = "mha" if kv == heads else ("mqa" if kv == 1 else "gqa")
        assert a["attention"] == expected, (mid, a["attention"], heads, kv)


def test_moe_fields(models: list[dict[str, Any]]) -> None:
    for m in _supported(models):
        a = m["architecture"]
        mid = m["id"]
        assert a["experts_per_token"] <= a["num_experts"], mid
        assert a["num_moe_layers"] <= a["num_layers"], mid
        if a["num_experts"]:
            assert a["experts_per_token"] >= 1, mid
            assert a["num_experts"] >= 2, mid
            assert _is_pos_int(a["moe_intermediate_size"]), mid
            assert a["num_moe_layers"] >= 1, mid
            assert m["active_parameters"] < m["parameters"], mid
        else:
            assert a["experts_per_token"] == 0 and a["num_moe_layers"] == 0, mid
            assert a["moe_intermediate_size"] is None, mid
            assert a["num_shared_experts"] == 0, mid
        if a["num_shared_experts"]:
            assert a["num_experts"] >= 1, mid
            assert _is_pos_int(a["shared_expert_intermediate_size"]), mid
        else:
            assert a["shared_expert_intermediate_size"] is None, mid


def test_sliding_window_fields(models: list[dict[str, Any]]) -> None:
    for m in _supported(models):
        a = m["architecture"]
        mid = m["id"]
        n = a["num_sliding_window_layers"]
        assert 0 <= n <= a["num_layers"], mid
        if n:
            assert _is_pos_int(a["sliding_window_tokens"]), mid
            assert a["sliding_window_tokens"] <= a["max_context_tokens"], mid
        else:
            assert a["sliding_window_tokens"] is None, mid


def test_specific_layouts(lookup: dict[str, dict[str, Any]]) -> None:
    """Interleaving patterns the brief spells out."""

    def arch(mid: str) -> dict[str, Any]:
        return lookup[mid]["architecture"]

    assert arch("mistralai/Mistral-7B-v0.1")["num_sliding_window_layers"] == 32
    g2 = arch("google/gemma-2-9b")
    assert g2["num_sliding_window_layers"] * 2 == g2["num_layers"]
    g3 = arch("google/gemma-3-27b-it")
    assert g3["num_sliding_window_layers"] == g3["num_layers"] - g3["num_layers"] // 6
    for mid, layers, experts in (("openai/gpt-oss-120b", 36, 128), ("openai/gpt-oss-20b", 24, 32)):
        a = arch(mid)
        assert (a["num_layers"], a["num_experts"], a["experts_per_token"]) == (layers, experts, 4)
        assert a["head_dim"] == 64 and a["sliding_window_tokens"] == 128
        assert a["num_sliding_window_layers"] * 2 == layers
    ds = arch("deepseek-ai/DeepSeek-V3")
    assert (ds["num_layers"], ds["num_moe_layers"], ds["attention"]) == (61, 58, "mla")
    mav = arch("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert (mav["num_layers"], mav["num_moe_layers"], mav["num_shared_experts"]) == (48, 24, 1)
    assert arch("meta-llama/Llama-4-Scout-17B-16E-Instruct")["num_moe_layers"] == 48
    assert arch("bigscience/bloom")["position"] == "alibi"
    assert arch("EleutherAI/gpt-j-6b")["parallel_residual"] is True
    deci = lookup["Deci/DeciLM-7B"]
    assert any("KV" in note or "kv" in note for note in deci["notes"])


# ----------------------------------------------------------------------------------------------
# parameter counts


@pytest.mark.parametrize("model_id,published,published_active", PUBLISHED_COUNTS)
def test_parameter_formula_matches_published(
    lookup: dict[str, dict[str, Any]],
    model_id: str,
    published: float,
    published_active: float | None,
) -> None:
    a = lookup[model_id]["architecture"]
    computed = count_parameters(a)
    assert computed == pytest.approx(published, rel=TOLERANCE), (model_id, computed / 1e9)
    if published_active is not None:
        # Vendors differ on whether the input-embedding lookup counts as "active": accept either.
        with_emb = count_parameters(a, active=True)
        without_emb = count_parameters(a, active=True, include_input_embedding=False)
        ok = any(abs(c / published_active - 1) <= TOLERANCE for c in (with_emb, without_emb))
        assert ok, (model_id, with_emb / 1e9, without_emb / 1e9, published_active / 1e9)


def test_parameter_field_consistent_with_architecture(models: list[dict[str, Any]]) -> None:
    """Every text-only supported entry's published total agrees with its architecture."""
    bad = []
    for m in _supported(models):
        if any("vision encoder" in note for note in m["notes"]):
            continue  # published totals include the vision tower
        a = m["architecture"]
        if a.get("num_mamba_layers") or a.get("num_delta_net_layers"):
            continue  # this formula is attention-only; tests/catalog/test_hf_config_*hybrid*.py
        computed = count_parameters(m["architecture"])
        if abs(computed / m["parameters"] - 1) > TOLERANCE:
            bad.append((m["id"], round(computed / 1e9, 3), m["parameters"] / 1e9))
    assert not bad, bad


def test_multimodal_totals_exceed_text_decoder(models: list[dict[str, Any]]) -> None:
    for m in _supported(models):
        if any("vision encoder" in note for note in m["notes"]):
            computed = count_parameters(m["architecture"])
            assert computed <= m["parameters"] * (1 + TOLERANCE), m["id"]
            assert computed >= m["parameters"] * 0.85, m["id"]


def test_block_scaled_fp8_is_an_fp8_checkpoint_with_its_source(
    models: list[dict[str, Any]],
) -> None:
    block = [m for m in _supported(models) if m["architecture"]["fp8_block_scaled"]]
    assert block, "the catalogue names block-scaled FP8 checkpoints (Qwen3 FP8, DeepSeek-V3)"
    for m in block:
        assert m["published_precision"] == "fp8", m["id"]
        assert "weight_block_size" in m["sources"]["fp8_block_scaled"], m["id"]


def test_norm_flags_are_gemma_facts_with_their_source(models: list[dict[str, Any]]) -> None:
    """Gemma's RMSNorm scales by (1 + weight); Gemma 2 and later (MedGemma is a Gemma 3) add
    post-sub-layer norms, which the first generation (Gemma, CodeGemma) lacks."""
    first_generation = ("gemma-1", "codegemma")
    for m in _supported(models):
        a, gemma = m["architecture"], m["family"] == "gemma"
        assert a["norm_unit_offset"] == gemma, m["id"]
        sandwich = gemma and m["series"] not in first_generation
        assert a["sandwich_norms"] == sandwich, m["id"]
        if gemma:
            assert "GemmaRMSNorm" in m["sources"]["norms"], m["id"]
