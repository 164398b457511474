"""docs/catalog/models.md: the catalogue by family and by architecture type, each model with
its parameters, precision and source."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

# Why a model type cannot be priced yet, by the kind of layer it has.
UNSUPPORTED_KINDS = {
    "hybrid SSM (Mamba-2 + attention)": {
        "nemotron_h", "jamba", "granitemoehybrid", "falcon_h1", "bamba", "zamba", "zamba2",
    },
    "state-space (Mamba)": {"mamba", "mamba2", "falcon_mamba"},
    "linear attention (gated DeltaNet, KDA, lightning)": {
        "qwen3_next", "qwen3_5", "qwen3_5_moe", "kimi_linear", "minimax", "kimi_k3",
    },
    "sparse attention (DSA and others)": {
        "deepseek_v32", "glm_moe_dsa", "deepseek_v4", "deepseek_ref", "minimax_m3", "minimax_m3_vl",
    },
    "layers of differing shapes (NAS)": {"nemotron-nas"},
}  # fmt: skip


def architecture_kind(entry: Mapping[str, Any]) -> str:
    """One label: the attention (MHA, GQA, MQA, MLA), MoE or dense, and windows where any."""
    arch = entry["architecture"]
    if arch is None:
        model_type = entry.get("model_type", "")
        kind = next((k for k, types in UNSUPPORTED_KINDS.items() if model_type in types), None)
        if kind is None and "Mamba-2" in (entry["unsupported_reason"] or ""):
            kind = "hybrid SSM (Mamba-2 + attention)"  # a hand-made entry names no model_type
        return f"unsupported: {kind or 'a model type not read yet'}"
    label = [arch["attention"].upper(), "MoE" if arch["num_experts"] else "dense"]
    windowed = arch["num_sliding_window_layers"]
    if windowed:
        label.append("sliding" if windowed == arch["num_layers"] else "local/global")
    return " ".join(label)


def _billions(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:.2f}"


def _row(entry: Mapping[str, Any]) -> str:
    total, active = entry["parameters"], entry["active_parameters"]
    size = _billions(total) if total == active else f"{_billions(total)} ({_billions(active)})"
    source = entry["sources"].get("config") or entry["sources"]["architecture"]
    return (
        f"| {entry['id']} | {architecture_kind(entry)} | {size} | "
        f"{entry['published_precision']} | {source.replace('|', '/')} |"
    )


def report_markdown(
    models: Sequence[Mapping[str, Any]], left_out: Sequence[str], command: str
) -> str:
    """The report, in catalogue order within each family."""
    families: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for entry in models:
        families[entry["family"]].append(entry)
    kinds = Counter(architecture_kind(e) for e in models)
    supported = sum(e["supported"] for e in models)
    lines = [
        "# The model catalogue",
        "",
        f"Written by `{command}` (do not edit by hand). {len(models)} models, {supported} "
        f"priced, {len(models) - supported} catalogued as `supported: false` with the reason.",
        "Parameters are in billions (active in brackets for MoE); the source is the file the",
        "figures came from (hand-made entries: the model's config.json and model card).",
        "",
        "## By architecture type",
        "",
        "| type | models |",
        "|---|---|",
        *(f"| {kind} | {count} |" for kind, count in sorted(kinds.items())),
        "",
        "## By family",
        "",
        "| family | models | priced |",
        "|---|---|---|",
        *(
            f"| {family} | {len(entries)} | {sum(e['supported'] for e in entries)} |"
            for family, entries in sorted(families.items())
        ),
    ]
    for family, entries in sorted(families.items()):
        lines += ["", f"### {family}", "", "| model | type | parameters (B) | precision | source |"]
        lines += ["|---|---|---|---|---|", *(_row(e) for e in entries)]
    lines += ["", "## Published configs left out", "", *(f"- {why}" for why in left_out)]
    return "\n".join(lines) + "\n"
