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


HARNESS_ENGINE = "hf-transformers"
"""The engine profile of what this harness runs (eager PyTorch, see workload.py)."""


def harness_request(config: PlannedConfiguration, torch_version: str) -> dict[str, Any] | str:
    """The estimate request that prices what the harness measures for `config`, or why the
    harness cannot measure it.

    The harness runs eager PyTorch, so the request names `hf-transformers` at torch's version;
    a plan that names another engine is refused (its quote prices another engine's kernels
    and overheads). On N GPUs the layers are split into N contiguous stages run one after
    another, so the request is `parallelism` pipeline = N; a plan asking for tensor, data or
    expert parallelism is refused rather than measured as something else.
    """
    request = dict(config.request)
    serving = dict(request.get("serving") or {})
    engine = serving.get("engine")
    if engine not in (None, HARNESS_ENGINE):
        return f"the plan asks for engine {engine}; this harness measures {HARNESS_ENGINE}"
    hardware = dict(request["hardware"])
    wanted = {k: int(v) for k, v in (hardware.get("parallelism") or {}).items()}
    stages = wanted.get("pipeline", config.gpu_count)
    others = {k: v for k, v in wanted.items() if k != "pipeline" and v != 1}
    if others or stages != config.gpu_count:
        return (
            f"the plan asks for parallelism {wanted}; this harness splits layers over the GPUs "
            f"(pipeline {config.gpu_count}) and runs no tensor, data or expert parallelism"
        )
    if config.gpu_count > 1:
        hardware["parallelism"] = {"tensor": 1, "pipeline": config.gpu_count}
    request["hardware"] = hardware
    request["serving"] = {**serving, "engine": HARNESS_ENGINE, "engine_version": torch_version}
    return request
