"""Repo ids that name a variant of a catalogued model: a quantisation (`-FP8`, `-AWQ`,
`-GPTQ-Int4`, `-bnb-4bit`, `-NVFP4`, ...), a fine-tune or a dated release (`-Instruct`,
`-it`, `-Thinking-2507`), of the same architecture, under its own or another organisation.

A variant is found by peeling such suffixes off the name, most specific first, until what is
left is a catalogued name (with the requested organisation, else under any organisation when
only one catalogued model bears it). The quantisation suffix names the weights' precision.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from service.core.dtypes import DType

# Quantisation suffixes (lower case, as a run of trailing '-'/'_'-separated tokens), each with
# the weight precision it names (None: a format this service does not price) and a note.
QUANT_SUFFIXES: dict[tuple[str, ...], tuple[DType | None, str]] = {
    ("fp8",): (DType.FP8, ""),
    ("fp8", "dynamic"): (DType.FP8, ""),
    ("fp8", "static"): (DType.FP8, ""),
    ("fp8", "block"): (DType.FP8, ""),
    ("w8a8", "fp8"): (DType.FP8, ""),
    ("int8",): (DType.INT8, ""),
    ("w8a8",): (DType.INT8, ""),
    ("w8a16",): (DType.INT8, ""),
    ("8bit",): (DType.INT8, ""),
    ("bnb", "8bit"): (DType.INT8, ""),
    ("gptq", "int8"): (DType.INT8, ""),
    ("int4",): (DType.INT4, ""),
    ("w4a16",): (DType.INT4, ""),
    ("4bit",): (DType.INT4, ""),
    ("bnb", "4bit"): (DType.INT4, ""),
    ("awq",): (DType.INT4, ""),
    ("awq", "int4"): (DType.INT4, ""),
    ("gptq",): (DType.INT4, ""),
    ("gptq", "int4"): (DType.INT4, ""),
    ("quantized.w8a8",): (DType.INT8, ""),  # Red Hat (Neural Magic) llm-compressor names
    ("quantized.w8a16",): (DType.INT8, ""),
    ("quantized.w4a16",): (DType.INT4, ""),
    ("mxfp4",): (DType.MXFP4, ""),
    ("nvfp4",): (DType.NVFP4, ""),
    ("fp4",): (DType.NVFP4, ""),  # NVIDIA's -FP4 checkpoints are NVFP4
    ("gguf",): (None, "GGUF (llama.cpp) quantisations are not priced"),
    ("exl2",): (None, "EXL2 (ExLlamaV2) quantisations are not priced"),
    ("mlx",): (None, "MLX (Apple silicon) checkpoints are not priced as such"),
}
# Fine-tune and release markers peeled after the quantisation suffix.
VARIANT_WORDS = frozenset(
    {"instruct", "chat", "it", "base", "hf", "pt", "thinking", "reasoning", "sft", "dpo",
     "rlhf", "aligned", "turbo"}
)  # fmt: skip
_DATE = re.compile(r"^(\d{4}|\d{6}|\d{8})$")  # 2507, 240718, 20250115
_SEPARATORS = re.compile(r"[-_]")


@dataclass(frozen=True, slots=True)
class Variant:
    """The catalogue id a requested id is a variant of, the weight precision its suffix names
    (None: none, or one not priced) and notes saying so."""

    base_id: str
    weights: DType | None
    notes: tuple[str, ...]


class VariantIndex:
    """Catalogued names (ids and aliases) by full id and by name without organisation."""

    def __init__(self, names: Iterable[tuple[str, Iterable[str]]]) -> None:
        self._by_id: dict[str, str] = {}
        self._by_name: dict[str, set[str]] = {}
        for model_id, aliases in names:
            for name in (model_id, *aliases):
                self._by_id[name.lower()] = model_id
                self._by_name.setdefault(name.lower().split("/")[-1], set()).add(model_id)

    def find(self, requested: str) -> Variant | None:
        """The catalogued model `requested` is a variant of, or None."""
        org, _, name = requested.strip().lower().rpartition("/")
        found = self._lookup(org, name)  # a catalogued name under another organisation
        if found is not None:
            return Variant(found, None, ())
        tokens = _SEPARATORS.split(name)
        weights, notes = None, []
        for length in (2, 1):  # the longest quantisation suffix first
            suffix = tuple(tokens[-length:])
            if len(tokens) > length and suffix in QUANT_SUFFIXES:
                weights, note = QUANT_SUFFIXES[suffix]
                tokens = tokens[:-length]
                notes += [note] if note else []
                break
        while tokens:
            found = self._lookup(org, "-".join(tokens)) or self._lookup(org, "_".join(tokens))
            if found is not None:
                return Variant(found, weights, tuple(notes))
            if len(tokens) == 1 or not (tokens[-1] in VARIANT_WORDS or _DATE.match(tokens[-1])):
                return None
            tokens = tokens[:-1]
        return None

    def _lookup(self, org: str, name: str) -> str | None:
        if org and f"{org}/{name}" in self._by_id:
            return self._by_id[f"{org}/{name}"]
        owners = self._by_name.get(name, set())
        return next(iter(owners)) if len(owners) == 1 else None
