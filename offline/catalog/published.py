"""One published model config as the build reads it: the repo id, a Hugging Face config.json
object, and where it came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self


@dataclass(frozen=True, slots=True)
class PublishedConfig:
    """`config` is a config.json object (verbatim, or written from a package's own fields under
    the names transformers reads); `source` says which package, version and file, and how."""

    repo_id: str
    config: Mapping[str, Any]
    source: str
    verbatim: bool
    notes: tuple[str, ...] = field(default=())
    # (tolerance, smallest size checked [parameters]): a source whose figures are kept only
    # where they give the size the repo name states (None: a verbatim config, not checked)
    name_check: tuple[float, float] | None = None
    # other repo ids of the same checkpoint (the source's own name, where the Hub's differs)
    aliases: tuple[str, ...] = field(default=())
    # a catalogued checkpoint of the same architecture (a fine-tune, another precision): a
    # source whose figures are kept only where they give that architecture's shape
    sibling: str | None = None
    # why the source's checkpoint is not catalogued (then `config` is empty)
    left_out: str | None = None
    # (parameters, where published) for a checkpoint under 0.1B whose name states no size: what
    # its count is held to in the name's place (distilgpt2: its model card's 82M)
    published_size: tuple[float, str] | None = None

    @classmethod
    def skipped(cls, repo_id: str, why: str) -> Self:
        """A checkpoint a source names but the build does not take, and why."""
        return cls(repo_id, {}, "", verbatim=False, left_out=why)
