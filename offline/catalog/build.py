"""The catalogue document: the hand-made entries as they are, then one entry per published
config whose repo id no earlier entry names (aiconfigurator-core first and the config.json files
vendored in offline/catalog/published_configs next: both verbatim; then litgpt, llm-analysis,
genz-llm, nemo-toolkit and ibm-fms, whose own fields are written as config.json keys), sorted by
family and id so that a rebuild writes the same file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline.catalog.aiconfigurator_configs import aiconfigurator_configs
from offline.catalog.entries import (
    BUILT_BY,
    SMALL_NAME_TOLERANCE,
    SMALL_PARAMETERS,
    catalogue_entry,
    name_sizes,
)
from offline.catalog.fms_configs import fms_configs
from offline.catalog.genz_configs import genz_configs
from offline.catalog.litgpt_configs import litgpt_configs
from offline.catalog.llama_models_configs import llama_models_configs
from offline.catalog.llm_analysis_configs import llm_analysis_configs
from offline.catalog.maxtext_configs import maxtext_configs
from offline.catalog.nemo_configs import SIBLINGS, nemo_configs
from offline.catalog.packages import PINNED
from offline.catalog.published import PublishedConfig
from offline.catalog.vendored_configs import vendored_configs

# Other repo ids the measured data names a generated entry by (the same checkpoint).
EXTRA_ALIASES = {
    # aiconfigurator's silicon sample names GLM-5 under Zhipu AI's former organisation
    "zai-org/GLM-5": ["zhipuai/GLM-5"],
}


def published_configs(packages: Mapping[str, Path]) -> Iterable[PublishedConfig]:
    """Every published config, in order of preference."""
    yield from aiconfigurator_configs(packages["aiconfigurator-core"])
    yield from vendored_configs()
    yield from maxtext_configs(packages["maxtext"])
    yield from litgpt_configs(packages["litgpt"])
    yield from llama_models_configs(packages["llama-models"])
    yield from llm_analysis_configs(packages["llm-analysis"])
    yield from genz_configs(packages["genz-llm"])
    yield from nemo_configs(packages["nemo-toolkit"], SIBLINGS)
    yield from fms_configs(packages["ibm-fms"])


def disagrees_with_name(entry: Mapping[str, Any], tolerance: float, smallest: float) -> bool:
    """Whether a supported entry's computed total (or active) parameters miss the size its
    name states (when at least `smallest`) by more than `tolerance` (genz-llm's
    Qwen1.5-MoE-A2.7B has 40 layers, not 24: 4.1B active)."""
    if not entry["supported"]:
        return False
    counted = (entry["parameters"], entry["active_parameters"])
    sizes = name_sizes(entry["id"])
    if counted[1] < counted[0] and sizes[1] == sizes[0]:
        # a MoE whose name states only its total (deepseek-moe-16b): no active size to check
        sizes = (sizes[0], None)
    return any(
        s is not None and s >= smallest and abs(c / s - 1) > tolerance
        for c, s in zip(counted, sizes, strict=True)
    )


def unnamed_small(entry: Mapping[str, Any], published: float | None = None) -> bool:
    """Whether a supported entry counts under SMALL_PARAMETERS without its name (else the
    `published` size its source records) stating that size within SMALL_NAME_TOLERANCE: a toy
    or test config, not a published checkpoint."""
    if not entry["supported"] or entry["parameters"] >= SMALL_PARAMETERS:
        return False
    if name_sizes(entry["id"])[0] is not None:
        return disagrees_with_name(entry, SMALL_NAME_TOLERANCE, 0.0)
    return published is None or abs(entry["parameters"] / published - 1) > SMALL_NAME_TOLERANCE


# The shape a sibling must share (the fields a source's figures set).
SHAPE = ("hidden_size", "num_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
         "intermediate_size", "vocab_size")  # fmt: skip


def shape_differences(entry: Mapping[str, Any], sibling: Mapping[str, Any]) -> list[str]:
    """`field a, not b` for each SHAPE field in which `entry` differs from `sibling` (two
    supported entries; none where either is unsupported)."""
    ours, theirs = entry["architecture"], sibling["architecture"]
    if ours is None or theirs is None:
        return []
    return [f"{k} {ours[k]}, not {theirs[k]}" for k in SHAPE if ours[k] != theirs[k]]


@dataclass(frozen=True, slots=True)
class Built:
    """The catalogue document, and the published configs left out of it (`id: why`)."""

    document: dict[str, Any]
    left_out: list[str]


def catalogue_document(previous: Mapping[str, Any], packages: Mapping[str, Path]) -> Built:
    """`previous` (the committed catalogue) with its generated entries built anew."""
    left_out: list[str] = []
    curated = [e for e in previous["models"] if e.get("built_by") != BUILT_BY]
    taken = {name.lower() for e in curated for name in (e["id"], *e["aliases"])}
    generated: list[dict[str, Any]] = []
    by_id = {e["id"]: e for e in curated}
    for published in published_configs(packages):
        names = [published.repo_id, *published.aliases, *EXTRA_ALIASES.get(published.repo_id, [])]
        if any(name.lower() in taken for name in names):
            continue
        if published.left_out is not None:
            left_out.append(f"{published.repo_id}: {published.left_out}")
            continue
        entry = catalogue_entry(published)
        size, where = published.published_size or (None, "")
        if unnamed_small(entry, size):
            left_out.append(
                f"{published.repo_id}: under {SMALL_PARAMETERS:.0e} parameters, and not the "
                "size its name states"
            )
            continue
        if where:
            entry["sources"]["parameters"] += f"; held to {where}"
        if published.name_check and disagrees_with_name(entry, *published.name_check):
            left_out.append(
                f"{published.repo_id}: {published.source.split(':')[0]} figures give "
                f"{entry['parameters'] / 1e9:.2f}B ({entry['active_parameters'] / 1e9:.2f}B "
                "active), not the size its name states"
            )
            continue
        sibling = by_id.get(published.sibling or "")
        if published.sibling and sibling is None:
            raise ValueError(f"{published.repo_id}: sibling {published.sibling} not catalogued")
        if sibling is not None and (differs := shape_differences(entry, sibling)):
            left_out.append(
                f"{published.repo_id}: {published.source.split(':')[0]} figures give "
                f"{'; '.join(differs)} ({sibling['id']}, the same architecture)"
            )
            continue
        entry["aliases"] = names[1:]
        taken.update(name.lower() for name in names)
        by_id[entry["id"]] = entry
        generated.append(entry)
    generated.sort(key=lambda e: (e["family"], e["id"].lower()))
    inputs = ", ".join(f"{name} {version}" for name, version in sorted(PINNED.items()))
    notes = previous["notes"].split(" Entries with built_by")[0]
    notes += (
        f" Entries with built_by '{BUILT_BY}' are written by `python -m offline.catalog` from "
        f"the config files published in {inputs} and the config.json files vendored in "
        "offline/catalog/published_configs (sources.config names the file); their "
        "parameter counts are computed from the architecture unless sources.parameters says "
        "otherwise."
    )
    return Built({**previous, "notes": notes, "models": [*curated, *generated]}, left_out)
