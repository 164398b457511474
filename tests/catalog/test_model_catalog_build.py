"""The built catalogue (python -m offline.catalog): its size and sources, published parameter
counts, every model of the shared measurements found, and the build's own readers."""

from __future__ import annotations

import ast
import csv
import re
from pathlib import Path
from typing import Any

import pytest

from offline.catalog.build import disagrees_with_name, shape_differences, unnamed_small
from offline.catalog.entries import name_sizes
from offline.catalog.families import family_of, series_of
from offline.catalog.genz_configs import _literal
from offline.catalog.genz_configs import hf_config as genz_config
from offline.catalog.litgpt_configs import hf_config, model_type_of
from offline.catalog.llama_models_configs import ffn_width
from offline.catalog.maxtext_configs import _left_out, _module_dicts
from offline.catalog.packages import PINNED
from offline.catalog.vendored_configs import LABEL
from offline.fitting.datasets_common import DEFAULT_DATA_DIR
from service.catalog.hf_config import read_config
from service.catalog.models import UnknownModel, load_model_catalog

SILICON = DEFAULT_DATA_DIR / "aiconfigurator" / "silicon_sample_h100_h200.csv"
# The `model` and `model_name` columns of the aiconfigurator kernel tables
# (shared/data/aiconfigurator/kernels/*/*/*/*/*.parquet), read with pyarrow on 2026-11-26;
# MAMBA2_GENERIC_1K/4K name synthetic shapes, not models.
KERNEL_TABLE_MODELS = [
    "MiniMaxAI/MiniMax-M3", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-V3.2", "nvidia/DeepSeek-V3.1-NVFP4", "nvidia/GLM-5-NVFP4",
    "sgl-project/DeepSeek-V4-Flash-FP8", "sgl-project/DeepSeek-V4-Pro-FP8", "zai-org/GLM-5",
    "zai-org/GLM-5-FP8", "zai-org/GLM-5.2", "zai-org/GLM-5.2-FP8", "Qwen/Qwen3.5-122B-A10B",
    "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-397B-A17B", "moonshotai/Kimi-K3",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4", "nvidia/Nemotron-H-56B-Base-8K",
    "Qwen/Qwen3.5-9B",
]  # fmt: skip
# Named in the gated-DeltaNet kernel tables, but no config.json of theirs was found published.
WITHOUT_PUBLISHED_CONFIG = ["Qwen/Qwen3.5-0.8B", "Qwen/Qwen3.5-2B", "Qwen/Qwen3.5-4B"]

# (id, published total, published active or None, where published). Active counts are
# checked with and without the input embedding, which vendors count differently.
PUBLISHED_COUNTS = [
    ("meta-llama/Llama-3.1-8B-Instruct", 8.03e9, None, "model card: 8.03B"),
    ("mistralai/Mixtral-8x7B-v0.1", 46.7e9, 12.9e9, "Mixtral paper: 46.7B total, 12.9B active"),
    ("Qwen/Qwen2.5-72B-Instruct", 72.7e9, None, "model card: 72.7B"),
    ("Qwen/Qwen2.5-7B", 7.61e9, None, "model card: 7.61B"),
    ("Qwen/Qwen2.5-0.5B", 0.49e9, None, "model card: 0.49B"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", 30.5e9, 3.3e9, "model card: 30.5B, 3.3B activated"),
    ("meta-llama/Llama-3.2-1B", 1.23e9, None, "model card: 1.23B"),
    ("meta-llama/Llama-3.2-3B", 3.21e9, None, "model card: 3.21B"),
    ("EleutherAI/pythia-12b", 11.846e9, None, "Pythia paper, table 1: 11,846,072,320"),
    ("EleutherAI/pythia-6.9b", 6.857e9, None, "Pythia paper, table 1: 6,857,302,016"),
    ("moonshotai/Kimi-K2.5", 1.04e12, 32.6e9, "Kimi K2 report: 1.04T total, 32.6B active"),
    ("nvidia/Nemotron-4-340B-Instruct", 340e9, None, "model card: 340B"),
    ("google/gemma-4-26B-A4B", 25.2e9, 3.8e9, "model card: 25.2B total, 3.8B active"),
    ("google/gemma-4-26b-a4b-it", 25.2e9, 3.8e9, "model card: 25.2B total, 3.8B active"),
    ("google/gemma-4-31b-it", 30.7e9, None, "model card: 30.7B"),
    ("XiaomiMiMo/MiMo-V2-Flash", 309e9, 15e9, "model card: 309B total, 15B active"),
    ("deepseek-ai/DeepSeek-V2-Lite", 15.7e9, None, "model card: 15.7B total"),
]
TOLERANCE = 0.02


@pytest.fixture(scope="module")
def models() -> list[dict[str, Any]]:
    return [dict(r.raw) for r in load_model_catalog().records]


def test_the_catalogue_holds_the_built_models_each_with_its_source(
    models: list[dict[str, Any]],
) -> None:
    built = [m for m in models if m.get("built_by") == "offline.catalog"]
    assert len(models) >= 351 and len(built) >= 266
    labels = [f"{name} {version}" for name, version in PINNED.items()] + [LABEL]
    packages = "|".join(re.escape(label) for label in labels)
    for m in built:
        assert re.match(f"^({packages}): ", m["sources"]["config"]), m["id"]
        assert m["sources"]["architecture"].startswith(f"https://huggingface.co/{m['id']} ")
        assert m["sources"]["parameters"] and m["sources"]["published_precision"], m["id"]


def test_the_report_lists_every_model(models: list[dict[str, Any]]) -> None:
    """docs/catalog/models.md is written with the catalogue: a stale one misses models."""
    report = (Path(__file__).resolve().parents[2] / "docs/catalog/models.md").read_text("utf-8")
    listed = set(re.findall(r"^\| ([^ |]+/[^ |]+) \|", report, re.MULTILINE))
    assert listed == {m["id"] for m in models}


@pytest.mark.parametrize(("model_id", "total", "active", "where"), PUBLISHED_COUNTS)
def test_parameters_match_the_published_count(
    model_id: str, total: float, active: float | None, where: str
) -> None:
    record = load_model_catalog().get(model_id)
    assert record.raw["parameters"] == pytest.approx(total, rel=TOLERANCE), where
    if active is not None:
        arch = record.require_architecture()
        embedding = arch.vocab_size * arch.hidden_size
        counted = record.raw["active_parameters"]
        assert any(abs(c / active - 1) <= TOLERANCE for c in (counted, counted - embedding))


def _resolves(name: str) -> bool:
    try:
        load_model_catalog().find(name)
    except UnknownModel:
        return False
    return True


def test_every_model_of_the_silicon_sample_resolves() -> None:
    if not SILICON.is_file():
        pytest.skip(f"{SILICON} is not there")
    with SILICON.open(encoding="utf-8") as fh:
        names = {row["model_path"] for row in csv.DictReader(fh)}
    assert len(names) == 12
    assert [n for n in sorted(names) if not _resolves(n)] == []


def test_every_model_of_the_kernel_tables_resolves_but_the_unpublished() -> None:
    assert [n for n in KERNEL_TABLE_MODELS if not _resolves(n)] == []
    assert [n for n in WITHOUT_PUBLISHED_CONFIG if _resolves(n)] == []


def test_a_litgpt_config_reads_as_its_entry() -> None:
    """Qwen2.5-7B in litgpt's own fields (litgpt/config.py after Config.__post_init__), written
    as qwen2 config.json keys: the same architecture as the catalogue's entry, and the card's
    28 layers, 28 query and 4 KV heads of 128, FFN 18944, vocabulary 152064."""
    litgpt = {
        "hf_config": {"org": "Qwen", "name": "Qwen2.5-7B"}, "name": "Qwen2.5-7B",
        "mlp_class_name": "LLaMAMLP", "norm_class_name": "RMSNorm", "latent_attention": None,
        "norm_qk": False, "norm_qk_type": "default", "attn_bias": True, "bias": False,
        "sliding_window_size": None, "n_embd": 3584, "n_layer": 28, "n_head": 28,
        "n_query_groups": 4, "head_size": 128, "intermediate_size": 18944,
        "padded_vocab_size": 152064, "block_size": 131072, "parallel_residual": False,
    }  # fmt: skip
    assert model_type_of(litgpt) == "qwen2"
    arch = read_config(hf_config(litgpt, "qwen2")).architecture
    assert arch == load_model_catalog().get("Qwen/Qwen2.5-7B").require_architecture()
    assert (arch.num_layers, arch.num_key_value_heads, arch.qkv_bias) == (28, 4, True)


def test_names_give_families_series_and_sizes() -> None:
    assert family_of("nvidia/Llama-3_3-Nemotron-Super-49B-v1") == "nemotron"
    assert series_of("google/gemma-2-9b-it") == "gemma-2"
    assert series_of("mistralai/Mixtral-8x7B-v0.1") == "mixtral"
    assert name_sizes("Qwen/Qwen3-30B-A3B-FP8") == (30e9, 3e9)
    assert name_sizes("facebook/opt-13b") == (13e9, 13e9)
    assert name_sizes("Qwen/Qwen1.5-MoE-A2.7B") == (None, 2.7e9)
    assert name_sizes("zai-org/GLM-5") == (None, None)
    assert name_sizes("Qwen/Qwen-1_8B") == (1.8e9, 1.8e9)  # Qwen-1's underscore decimal point
    assert name_sizes("EleutherAI/pythia-70m-deduped") == (70e6, 70e6)
    assert name_sizes("Qwen/Qwen2.5-7B-Instruct-1M") == (7e9, 7e9)  # 1M: the context, after 7B


def test_a_checkpoint_under_0_1b_is_kept_only_at_the_size_its_name_states() -> None:
    """Pythia-14m's 6 layers of 128 with untied 50304 x 128 embeddings: 14.06M weights by hand
    (parameter_count leaves biases and norms out), its catalogue count."""
    by_hand = 2 * 50304 * 128 + 6 * 12 * 128 * 128  # embeddings, then QKV, out, MLP (no biases)
    assert load_model_catalog().get("EleutherAI/pythia-14m").raw["parameters"] == by_hand
    pythia = {"id": "EleutherAI/pythia-14m", "supported": True}
    assert not unnamed_small(pythia | {"parameters": by_hand, "active_parameters": by_hand})
    assert unnamed_small(pythia | {"parameters": 9e6, "active_parameters": 9e6})
    toy = {"id": "hf-internal-testing/tiny-random-LlamaForCausalLM", "supported": True}
    assert unnamed_small(toy | {"parameters": 1e6, "active_parameters": 1e6})
    assert not unnamed_small(toy | {"parameters": 2e8, "active_parameters": 2e8})
    # DistilGPT2 names no size: held to its model card's 82M. 6 layers of 768 and tied 50257 x
    # 768 embeddings: 81.06M weights by hand (its 1024 x 768 position table, biases and norms
    # are not counted by parameter_count)
    distil = 50257 * 768 + 6 * 12 * 768 * 768
    record = load_model_catalog().get("distilbert/distilgpt2")
    assert record.raw["parameters"] == distil
    entry = {"id": record.id, "supported": True, "parameters": distil}
    assert not unnamed_small(entry, 82e6) and unnamed_small(entry)


def test_a_secondary_source_is_kept_only_where_its_size_matches_the_name() -> None:
    """genz-llm gives Qwen1.5-MoE-A2.7B 40 layers (the card: 24): 4.1B active, not 2.7B."""
    moe = {"id": "Qwen/Qwen1.5-MoE-A2.7B", "supported": True}
    assert disagrees_with_name(moe | {"parameters": 23.4e9, "active_parameters": 4.07e9}, 0.08, 0)
    assert not disagrees_with_name(
        moe | {"parameters": 14.3e9, "active_parameters": 2.7e9}, 0.08, 0
    )
    small = {"id": "meta-llama/Llama-3.2-1B", "supported": True}  # the name rounds 1.24B down
    assert not disagrees_with_name(
        small | {"parameters": 1.24e9, "active_parameters": 1.24e9}, 0.1, 10e9
    )
    assert _literal(ast.parse("4*768", mode="eval").body) == 3072


def test_genz_mamba_fields_read_as_falcon_mambas_mixer() -> None:
    """genz's falcon-mamba-7b (misc.py) has intermediate_size=0 (num_ffi=0: no MLP) and its
    mixer under mamba_* names; written as FalconMambaConfig keys the mixer is 2 x 4096 = 8192
    wide (expand x hidden), state 16, conv 4, dt rank 256, over 64 layers."""
    genz = {
        "hidden_size": 4096, "num_attention_heads": 1, "num_key_value_heads": 1,
        "intermediate_size": 0, "num_decoder_layers": 64, "max_model_len": 131072,
        "vocab_size": 50280, "hidden_act": "silu", "mamba_d_state": 16, "mamba_dt_rank": 256,
        "mamba_expand": 2, "mamba_d_conv": 4,
    }  # fmt: skip
    arch = read_config(genz_config(genz, "falcon_mamba")).architecture
    assert arch.mamba is not None and arch.num_mamba_layers == 64
    assert (arch.mamba.num_heads, arch.mamba.state_size) == (8192, 16)
    assert (arch.mamba.conv_kernel, arch.mamba.dt_rank) == (4, 256)
    assert load_model_catalog().get("tiiuae/falcon-mamba-7b").raw["supported"]


@pytest.mark.parametrize(
    ("dim", "multiplier", "multiple_of", "width"),
    [(4096, 1.3, 1024, 14336), (8192, 1.3, 4096, 28672), (16384, 1.2, 4096, 53248)],
)
def test_meta_ffn_width(dim: int, multiplier: float, multiple_of: int, width: int) -> None:
    """Meta's FeedForward: int(2 x 4 dim / 3) x multiplier, rounded up to multiple_of; Llama 3.1
    8B/70B/405B's config.json widths (14336, 28672, 53248)."""
    args = {"dim": dim, "ffn_dim_multiplier": multiplier, "multiple_of": multiple_of}
    assert ffn_width(args) == width


def test_a_source_is_kept_only_where_it_gives_its_siblings_shape() -> None:
    """llama-models gives Llama-2-7b-chat 8 KV heads and FFN 14336; Llama-2-7b-hf's config.json
    has 32 and 11008: the chat model is left out. Llama Guard 3 8B, a Llama 3.1 8B, is kept."""
    catalogue = load_model_catalog()
    base = catalogue.get("meta-llama/Llama-2-7b-hf").raw
    wrong = {**base["architecture"], "num_key_value_heads": 8, "intermediate_size": 14336}
    assert shape_differences({"architecture": wrong}, base) == [
        "num_key_value_heads 8, not 32",
        "intermediate_size 14336, not 11008",
    ]
    assert not _resolves("meta-llama/Llama-2-7b-chat")
    guard = catalogue.get("meta-llama/Llama-Guard-3-8B").raw
    assert shape_differences(guard, catalogue.get("meta-llama/Llama-3.1-8B-Instruct").raw) == []


def test_genz_glm_4_9b_reads_as_glm() -> None:
    """genz's glm-4-9b-chat (ChatGLM's remote-code config) written as GlmConfig keys: 40 layers
    of 32 query and 2 KV heads of 128 with q/k/v biases, SwiGLU FFN 13696, vocabulary 151552,
    untied: 40 x (2 x 4096^2 + 2 x 4096 x 256 + 3 x 4096 x 13696) + 2 x 151552 x 4096 =
    9,399,435,264 weights (biases and norms not counted)."""
    arch = load_model_catalog().get("THUDM/glm-4-9b-chat").require_architecture()
    assert (arch.num_layers, arch.num_key_value_heads, arch.head_dim) == (40, 2, 128)
    assert arch.qkv_bias and arch.activation == "silu" and not arch.tie_word_embeddings
    assert load_model_catalog().get("THUDM/glm-4-9b-chat").raw["parameters"] == 9_399_435_264


def test_maxtext_dicts_as_the_module_leaves_them() -> None:
    """The converter module's dicts after its copies, spreads, item assignments and updates;
    the comment above each kept to judge it."""
    text = "\n".join([
        "import transformers",
        "# from https://huggingface.co/org/a/blob/main/config.json",
        "a_dict = {'model_type': 'x', 'text_config': {'n': 1, 'layer_types': ['s', 'f'] * 2}}",
        "b_dict = a_dict.copy()",
        "b_dict['text_config'] = a_dict['text_config'].copy()",
        "b_dict['text_config'].update({'n': 2})",
        "c_dict = {**a_dict, 'model_type': 'y'}",
        "a_config = transformers.XConfig(**a_dict)",
    ])  # fmt: skip
    dicts, comments = _module_dicts(text)
    assert dicts["a_dict"]["text_config"] == {"n": 1, "layer_types": ["s", "f", "s", "f"]}
    assert dicts["b_dict"]["text_config"]["n"] == 2
    assert dicts["c_dict"]["model_type"] == "y" and dicts["c_dict"]["text_config"]["n"] == 1
    assert (
        comments["a_dict"].startswith("# from https://huggingface.co/org/a/")
        and not comments["b_dict"]
    )
    assert _left_out("org/a", dicts["a_dict"], comments["a_dict"]) is None
    assert _left_out("org/b", dicts["a_dict"], comments["a_dict"]) == "org/a's config.json"
    assert _left_out("org/a-FP8", dicts["c_dict"], "") is not None  # no quantization_config
