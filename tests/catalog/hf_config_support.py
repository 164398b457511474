"""Published config.json fixtures (tests/catalog/fixtures), each with its source."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@cache
def published_configs(name: str) -> dict[str, dict[str, Any]]:
    """repo id -> config.json, from fixtures/<name>.json (every entry names its source)."""
    document = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    entries = document["configs"]
    assert all(e["source"].startswith("https://huggingface.co/") for e in entries.values())
    return {repo: entry["config"] for repo, entry in entries.items()}


def catalogued_configs() -> dict[str, dict[str, Any]]:
    """Configs of models the catalogue has an entry of."""
    return published_configs("catalogued_configs")


def uncatalogued_configs() -> dict[str, dict[str, Any]]:
    """Configs of model types the catalogue has no entry of."""
    return published_configs("uncatalogued_configs")
