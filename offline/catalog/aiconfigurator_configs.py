"""aiconfigurator-core ships the Hugging Face config.json of each model it models, verbatim
(`aiconfigurator_core/model_configs/<org>--<name>_config.json`), beside a ModelOpt
`hf_quant_config.json` for NVIDIA's quantised checkpoints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from offline.catalog.packages import label
from offline.catalog.published import PublishedConfig

PACKAGE = "aiconfigurator-core"
_FOLDER = "aiconfigurator_core/model_configs"
_QUANT_SUFFIX = "_hf_quant_config.json"


def aiconfigurator_configs(root: Path) -> Iterator[PublishedConfig]:
    """Every config.json in the unpacked package at `root`, in file-name order."""
    folder = root / _FOLDER
    for path in sorted(folder.glob("*_config.json")):
        if path.name.endswith(_QUANT_SUFFIX):
            continue
        stem = path.name.removesuffix("_config.json")
        repo_id = stem.replace("--", "/", 1)
        config: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        source = f"{label(PACKAGE)}: {_FOLDER}/{path.name} (config.json verbatim)"
        quant = folder / f"{stem}{_QUANT_SUFFIX}"
        if "quantization_config" not in config and quant.is_file():
            config["quantization_config"] = modelopt_quantization(quant)
            source += f"; quantization from {_FOLDER}/{quant.name}"
        yield PublishedConfig(repo_id, config, source, verbatim=True)


def modelopt_quantization(path: Path) -> dict[str, Any]:
    """A ModelOpt hf_quant_config.json as the `quantization_config` transformers builds from it
    (quant_method "modelopt" with the checkpoint's quant_algo: FP8, NVFP4, ...)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    algo = document.get("quantization", {}).get("quant_algo")
    return {"quant_method": "modelopt", "quant_algo": algo}
