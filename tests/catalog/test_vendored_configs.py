"""The config.json files vendored in offline/catalog/published_configs: each with its provenance,
each the size its model card (else its name) publishes, each read as its catalogue entry; and the
readers of the model types they brought (exaone4, ministral3), checked by hand."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from offline.catalog.vendored_configs import FOLDER, LABEL, config_path, provenance
from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog
from service.core.dtypes import DType
from service.core.memory import parameter_count

RECORDS = provenance()
TOLERANCE = 0.03


def _config(repo_id: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(config_path(repo_id).read_text(encoding="utf-8"))
    return document


def test_every_vendored_file_has_its_provenance() -> None:
    files = {p.relative_to(FOLDER).with_suffix("").as_posix() for p in FOLDER.glob("*/*.json")}
    assert files == set(RECORDS) and len(files) >= 8
    for repo_id, record in RECORDS.items():
        assert record["huggingface"] == f"https://huggingface.co/{repo_id}/blob/main/config.json"
        read = record["read_from"]
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", read["repository"]), repo_id
        assert read["path"].endswith(".json") and re.fullmatch(r"[0-9a-f]{40}", read["commit"])
        assert record["published_parameters"]["where"], repo_id


@pytest.mark.parametrize("repo_id", sorted(RECORDS))
def test_vendored_config_reads_as_its_catalogue_entry(repo_id: str) -> None:
    record = load_model_catalog().get(repo_id)
    read = read_config(_config(repo_id))
    assert read.architecture == record.require_architecture()
    assert read.published_precision is record.published_precision
    source = record.raw["sources"]["config"]
    assert source.startswith(f"{LABEL}: offline/catalog/published_configs/{repo_id}.json, ")
    assert RECORDS[repo_id]["read_from"]["repository"] in source


@pytest.mark.parametrize("repo_id", sorted(RECORDS))
def test_vendored_config_gives_the_published_size(repo_id: str) -> None:
    """A copy altered in a width, a depth or a vocabulary misses the published count."""
    published = RECORDS[repo_id]["published_parameters"]
    arch = read_config(_config(repo_id)).architecture
    counted = parameter_count(arch)
    if not published["embeddings"]:
        counted -= arch.vocab_size * arch.hidden_size * (1 if arch.tie_word_embeddings else 2)
    tolerance = published.get("tolerance", TOLERANCE)
    assert counted == pytest.approx(published["total"], rel=tolerance), published["where"]


@pytest.mark.parametrize(
    "repo_id", sorted(r for r in RECORDS if "tolerance" in RECORDS[r]["published_parameters"])
)
def test_a_wider_tolerance_stays_inside_the_rounding_of_the_published_size(repo_id: str) -> None:
    """A size published in whole billions ("6B") leaves half a billion either way (8.3 % at
    6B): a record may widen the 3 % to no more than that, and says why in its notes."""
    published = RECORDS[repo_id]["published_parameters"]
    assert published["total"] % 1e9 == 0
    assert TOLERANCE < published["tolerance"] <= 0.5e9 / published["total"]
    assert any("rounded" in note for note in RECORDS[repo_id]["notes"])


def test_exaone4_reads_local_and_global_layers() -> None:
    """EXAONE-4.0-32B's config.json: 64 layers listed LLLG (48 local, 4096-token window),
    40 query heads of 128 over 8 KV heads, FFN 27392. Without embeddings each layer holds
    5120 x (5120 + 2 x 1024) + 5120 x 5120 = 62,914,560 attention and 3 x 5120 x 27392 =
    420,741,120 MLP weights: x 64 = 30,953,963,520, the card's 30.95B."""
    arch = read_config(_config("LGAI-EXAONE/EXAONE-4.0-32B")).architecture
    assert (arch.num_layers, arch.num_attention_heads, arch.num_key_value_heads) == (64, 40, 8)
    assert (arch.head_dim, arch.intermediate_size, arch.vocab_size) == (128, 27392, 102400)
    assert (arch.num_sliding_window_layers, arch.sliding_window_tokens) == (48, 4096)
    assert not arch.tie_word_embeddings
    assert parameter_count(arch) - 2 * 102400 * 5120 == 30_953_963_520


@pytest.mark.parametrize("pattern", ["LLLG", 4])
def test_exaone4_window_pattern_without_layer_types(pattern: str | int) -> None:
    """Without layer_types the pattern decides: "LLLG" and 4 both leave every 4th of 8 layers
    global, so 6 are local."""
    config = {k: v for k, v in _config("LGAI-EXAONE/EXAONE-4.0-32B").items() if k != "layer_types"}
    config |= {"num_hidden_layers": 8, "sliding_window_pattern": pattern}
    assert read_config(config).architecture.num_sliding_window_layers == 6


def test_ministral3_reads_without_a_window_and_with_per_tensor_fp8() -> None:
    """Devstral-2-123B: 88 layers of 96 query and 8 KV heads of 128, FFN 28672, no window
    (sliding_window null), FP8 weights with one scale per tensor (weight_block_size null)."""
    read = read_config(_config("mistralai/Devstral-2-123B-Instruct-2512"))
    arch = read.architecture
    assert (arch.num_layers, arch.num_attention_heads, arch.num_key_value_heads) == (88, 96, 8)
    assert (arch.head_dim, arch.intermediate_size, arch.hidden_size) == (128, 28672, 12288)
    assert arch.num_sliding_window_layers == 0 and not arch.fp8_block_scaled
    assert read.published_precision is DType.FP8


def test_an_abridged_copy_reads_as_its_siblings_verbatim_config() -> None:
    """Qwen3-VL-235B-A22B-Thinking's copy keeps its text_config whole (94 layers, 128 experts of
    1536, 8 routed, 64 query and 4 KV heads of 128) and trims the vision config: it reads as the
    Instruct model's verbatim config.json does."""
    catalogue = load_model_catalog()
    thinking = read_config(_config("Qwen/Qwen3-VL-235B-A22B-Thinking")).architecture
    assert thinking == catalogue.get("Qwen/Qwen3-VL-235B-A22B-Instruct").require_architecture()
    assert (thinking.num_layers, thinking.num_experts, thinking.experts_per_token) == (94, 128, 8)
    assert (thinking.moe_intermediate_size, thinking.num_key_value_heads) == (1536, 4)


def test_deepseek_v31_reads_block_scaled_fp8_mla() -> None:
    """DeepSeek-V3.1: 61 layers, the first 3 dense, MLA (q rank 1536, kv rank 512), 256 routed
    experts of 2048 and 1 shared, FP8 weights with 128 x 128 block scales."""
    read = read_config(_config("deepseek-ai/DeepSeek-V3.1"))
    arch = read.architecture
    assert arch.mla is not None and (arch.num_layers, arch.num_moe_layers) == (61, 58)
    assert (arch.num_experts, arch.moe_intermediate_size, arch.num_shared_experts) == (256, 2048, 1)
    assert read.published_precision is DType.FP8 and arch.fp8_block_scaled
