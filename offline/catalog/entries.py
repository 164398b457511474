"""A published config read into a catalogue entry by the service's own config.json reader;
parameter counts computed from the architecture read (configs state none)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from offline.catalog.families import family_of, series_of
from offline.catalog.published import PublishedConfig
from service.catalog.hf_config import read_config
from service.catalog.hf_config.multimodal import text_view
from service.catalog.hf_config.precision import published_precision
from service.catalog.hf_config.view import ConfigView
from service.core.architecture import ModelArchitecture
from service.core.cost_model_errors import CostModelError
from service.core.memory import active_parameter_count, parameter_count

BUILT_BY = "offline.catalog"
# Model types whose parameters can be counted by reading the config as the type named (the
# same weight keys), though the cost model cannot price their attention yet.
COUNTED_AS = {
    "deepseek_v32": "deepseek_v3",  # DeepSeek-V3 layers plus the DSA indexer
    "glm_moe_dsa": "deepseek_v3",  # GLM-5: MLA and DeepSeek-style MoE plus the DSA indexer
}
# Qwen-1 writes the decimal point as an underscore (Qwen-1_8B: 1.8B)
_NAME_TOTAL = re.compile(r"(?:^|[-_])(\d+(?:[._]\d+)?)B(?=$|[-_])", re.IGNORECASE)
# Checkpoints under 0.1B state their size in millions (pythia-70m), read where no B size is stated
_NAME_MILLIONS = re.compile(r"(?:^|[-_])(\d+(?:\.\d+)?)M(?=$|[-_])", re.IGNORECASE)
_NAME_ACTIVE = re.compile(r"[-_]A(\d+(?:\.\d+)?)B(?=$|[-_])", re.IGNORECASE)
GEMMA_NORMS = (
    "transformers modeling_gemma*.py: GemmaRMSNorm scales by (1 + weight); Gemma 2, 3 and 4 add "
    "post-attention and post-feedforward norms"
)
# A checkpoint under 0.1B is kept only where its name states the size it counts (pythia-14m):
# toy and test configs (tiny-random-*) name none.
SMALL_PARAMETERS = 1e8
SMALL_NAME_TOLERANCE = 0.10


def attention_kind(arch: ModelArchitecture) -> str:
    if arch.mla is not None:
        return "mla"
    if arch.num_key_value_heads == arch.num_attention_heads:
        return "mha"
    return "mqa" if arch.num_key_value_heads == 1 else "gqa"


def architecture_document(arch: ModelArchitecture) -> dict[str, Any]:
    """The catalogue's `architecture` object: the dataclass fields plus the attention kind."""
    document = dataclasses.asdict(arch)
    document["attention"] = attention_kind(arch)
    return document


def name_sizes(repo_id: str) -> tuple[float | None, float | None]:
    """(total, active) parameters a name states (`...-30B-A3B`, `...-56B-...`, `...-A2.7B`,
    `pythia-70m`): None where it states none; the active count is the total where only that is
    stated. A size in millions is read only where no size in billions is stated (`-1M` is a
    context length after `-7B`)."""
    name = repo_id.split("/")[-1]
    total, active = _NAME_TOTAL.search(name), _NAME_ACTIVE.search(name)
    total_b = float(total.group(1).replace("_", ".")) * 1e9 if total else None
    if total_b is None and (millions := _NAME_MILLIONS.search(name)):
        total_b = float(millions.group(1)) * 1e6
    active_b = float(active.group(1)) * 1e9 if active else total_b
    return total_b, active_b


def catalogue_entry(published: PublishedConfig) -> dict[str, Any]:
    """The entry of `published`."""
    config, repo_id = published.config, published.repo_id
    model_type = str(config.get("model_type", ""))
    where = f"https://huggingface.co/{repo_id} config.json, as in {published.source}"
    entry: dict[str, Any] = {
        "id": repo_id, "aliases": [], "family": family_of(repo_id), "series": series_of(repo_id),
        "model_type": model_type, "built_by": BUILT_BY,
    }  # fmt: skip
    sources = {"architecture": where, "config": published.source}
    try:
        read = read_config(config)
    except CostModelError as error:
        reason = error.message.split("; it reads ")[0]  # not the list of every type read
        return _unsupported(entry, sources, published, reason)
    arch = read.architecture
    total, active = parameter_count(arch), active_parameter_count(arch)
    sources["published_precision"] = _precision_source(published, read.published_precision.value)
    sources["parameters"] = "computed from the architecture (config.json states no count)"
    if arch.fp8_block_scaled:
        sources["fp8_block_scaled"] = "config.json quantization_config.weight_block_size"
    if arch.norm_unit_offset:
        sources["norms"] = GEMMA_NORMS
    notes = [*read.notes, *published.notes]
    if any("vision encoder" in note for note in notes):
        sources["parameters"] += "; text decoder only"
    return entry | {
        "supported": True, "unsupported_reason": None,
        "published_precision": read.published_precision.value,
        "parameters": total, "active_parameters": active,
        "architecture": architecture_document(arch), "notes": notes, "sources": sources,
    }  # fmt: skip


def _precision_source(published: PublishedConfig, value: str) -> str:
    if not published.verbatim:
        return f"{value}: {published.notes[0]}" if published.notes else value
    return f"{value}: config.json quantization_config, else torch_dtype"


def _unsupported(
    entry: dict[str, Any], sources: dict[str, str], published: PublishedConfig, reason: str
) -> dict[str, Any]:
    """An entry the cost model cannot price: no architecture, the reader's reason, and the
    parameters counted as a sibling type reads them, else as the name states them."""
    total = active = None
    base = COUNTED_AS.get(entry["model_type"])
    if base is not None:
        arch = read_config({**published.config, "model_type": base}).architecture
        total, active = parameter_count(arch), active_parameter_count(arch)
        sources["parameters"] = (
            f"computed from config.json read as {base} (the weights it shares; the sparse-"
            "attention indexer not counted)"
        )
    elif (sizes := name_sizes(entry["id"]))[0] is not None:
        total, active = sizes
        sources["parameters"] = "as the repo name states them (total, and active after -A)"
    else:
        sources["parameters"] = "not counted: an architecture the reader cannot count yet"
    view = ConfigView(published.config)
    precision = published_precision(view, text_view(view)).weights.value
    sources["published_precision"] = (
        f"{precision}: config.json quantization_config, else torch_dtype"
    )
    return entry | {
        "supported": False, "unsupported_reason": reason, "published_precision": precision,
        "parameters": total, "active_parameters": active, "architecture": None,
        "notes": list(published.notes), "sources": sources,
    }  # fmt: skip
