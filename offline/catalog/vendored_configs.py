"""Hugging Face config.json files no pinned package ships, vendored verbatim under
`published_configs/<org>/<name>.json` (facts, as published), each with its provenance in
`published_configs/provenance.json`: the repo id, and where the copy was read (a public
repository, path and commit that hold the file as Hugging Face serves it).

Each record also carries the parameter count the model card (else the repo name) publishes; the
catalogue tests hold the size computed from the file to it, which a copy altered in its sizes
would miss. A file without a provenance record, or a record without a file, stops the build."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from offline.catalog.published import PublishedConfig

FOLDER = Path(__file__).resolve().parent / "published_configs"
PROVENANCE = FOLDER / "provenance.json"
LABEL = "published config.json"


def provenance() -> dict[str, dict[str, Any]]:
    """repo id -> its record: `read_from` (repository, path, commit), `published_parameters`
    (total, whether it counts the embeddings, where it is published), `notes` where any."""
    document: dict[str, dict[str, Any]] = json.loads(PROVENANCE.read_text(encoding="utf-8"))
    return document["configs"]


def config_path(repo_id: str) -> Path:
    return FOLDER / f"{repo_id}.json"


def vendored_configs(folder: Path = FOLDER) -> Iterator[PublishedConfig]:
    """Every vendored config.json, in repo-id order, with the source it was read from."""
    records = provenance()
    files = {p.relative_to(folder).with_suffix("").as_posix() for p in folder.glob("*/*.json")}
    if files != set(records):
        raise ValueError(
            f"{PROVENANCE.name} and the vendored files disagree: without record "
            f"{sorted(files - set(records))}, without file {sorted(set(records) - files)}"
        )
    for repo_id in sorted(records, key=str.lower):
        record = records[repo_id]
        config: Mapping[str, Any] = json.loads(config_path(repo_id).read_text(encoding="utf-8"))
        source = f"{LABEL}: offline/catalog/published_configs/{repo_id}.json, {where(record)}"
        notes = tuple(record.get("notes", ()))
        yield PublishedConfig(repo_id, config, source, verbatim=True, notes=notes)


def where(record: Mapping[str, Any]) -> str:
    """`as read from <repository>/<path> @ <commit>`."""
    read = record["read_from"]
    return f"as read from github.com/{read['repository']}/{read['path']} @ {read['commit'][:12]}"
