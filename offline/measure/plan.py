"""Reading a measurement plan (written by ``python -m offline.sampling propose``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline.sampling.plan import PLAN_FORMAT


class InvalidPlan(ValueError):
    """The file is not a measurement plan this harness reads."""


@dataclass(frozen=True, slots=True)
class PlannedConfiguration:
    """One configuration to measure, with the estimate request that quotes it."""

    id: str
    model: str
    layers_delta: int
    batch_size: int
    prompt_tokens: int
    output_tokens: int
    gpu: str
    gpu_count: int
    request: dict[str, Any]


def _configuration(item: Any, index: int) -> PlannedConfiguration:
    try:
        request = item["request"]
        workload, hardware = request["workload"], request["hardware"]
        config = PlannedConfiguration(
            id=str(item["id"]),
            model=str(item["model"]),
            layers_delta=int(item.get("layers_delta", 0)),
            batch_size=int(workload["batch_size"]),
            prompt_tokens=int(workload["prompt_tokens"]),
            output_tokens=int(workload["output_tokens"]),
            gpu=str(hardware["gpu"]),
            gpu_count=int(hardware.get("count", 1)),
            request=dict(request),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidPlan(f"configuration {index}: missing or invalid {error}") from None
    if min(config.batch_size, config.prompt_tokens, config.output_tokens, config.gpu_count) < 1:
        raise InvalidPlan(f"configuration {config.id}: sizes must be at least 1")
    return config


def read_plan(path: Path) -> list[PlannedConfiguration]:
    """The plan's configurations, in order; InvalidPlan naming what is wrong."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise InvalidPlan(f"{path}: {error}") from None
    if not isinstance(document, dict) or document.get("format") != PLAN_FORMAT:
        raise InvalidPlan(f"{path}: not a measurement plan (format {PLAN_FORMAT!r} expected)")
    items = document.get("configurations")
    if not isinstance(items, list) or not items:
        raise InvalidPlan(f"{path}: no configurations")
    configurations = [_configuration(item, i) for i, item in enumerate(items)]
    ids = [c.id for c in configurations]
    if len(set(ids)) != len(ids):
        raise InvalidPlan(f"{path}: configuration ids are not unique")
    return configurations
