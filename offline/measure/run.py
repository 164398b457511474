"""Running a plan: measure every configuration and write (or post) observations.

Each configuration gives one JSON line: the estimate request, the GPU energy and time of
prefill, decode and the whole request (each repeated until stable, with its spread), and the
whole request's `observation` in the body `POST /v1/quotes/{id}/observations` takes. With a
service URL the request is quoted there and the observation posted against the quote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO

from offline.measure.meter import EnergyMeter
from offline.measure.plan import PlannedConfiguration
from offline.measure.stability import PhaseEnergy, StabilityRule, measure_phase
from offline.measure.workload import PhaseRunners

MEASURED_WITH = "nvml-total-energy (offline.measure)"
DEFAULT_RULE = StabilityRule()


class Poster(Protocol):
    def post(self, record: dict[str, Any]) -> str: ...


class ServicePoster:
    """Quotes each request on a running service and posts the observation against it."""

    def __init__(self, base_url: str, key: str | None, timeout_s: float = 30.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)

    def post(self, record: dict[str, Any]) -> str:
        quoted = self.client.post("/v1/estimate", json=record["request"])
        quoted.raise_for_status()
        quote_id = str(quoted.json()["quote_id"])
        key = f"measure-{record['configuration_id']}-{record['observation']['measured_at']}"
        stored = self.client.post(
            f"/v1/quotes/{quote_id}/observations",
            json=record["observation"],
            headers={"Idempotency-Key": key[:200]},
        )
        stored.raise_for_status()
        return quote_id


def _phase(energy: PhaseEnergy) -> dict[str, Any]:
    out = asdict(energy)
    out["samples_j"] = list(energy.samples_j)
    return out


def measure_configuration(
    config: PlannedConfiguration, runners: PhaseRunners, meter: EnergyMeter, rule: StabilityRule
) -> dict[str, Any]:
    """The measurement record of one configuration."""
    phases = {
        name: measure_phase(run, meter, rule, synchronize=runners.synchronize)
        for name, run in (
            ("prefill", runners.prefill),
            ("decode", runners.decode),
            ("request", runners.together),
        )
    }
    whole = phases["request"]
    return {
        "configuration_id": config.id,
        "model": config.model,
        "layers_delta": config.layers_delta,
        "request": config.request,
        "device": meter.name,
        "stable": all(p.stable for p in phases.values()),
        "phases": {name: _phase(p) for name, p in phases.items()},
        "observation": {
            "gpu_j": whole.gpu_j,
            "total_s": whole.time_s,
            "measured_with": MEASURED_WITH,
            "measured_at": datetime.now(UTC).isoformat(),
        },
    }


def run_plan(
    configs: Iterable[PlannedConfiguration],
    meter: EnergyMeter,
    build: Callable[[PlannedConfiguration], PhaseRunners],
    out: TextIO,
    *,
    rule: StabilityRule = DEFAULT_RULE,
    gpus_available: int = 1,
    poster: Poster | None = None,
    log: Callable[[str], None] = print,
) -> tuple[int, int]:
    """Measure every configuration, one JSON line each (skipped ones say why); returns
    (measured, skipped)."""
    measured = skipped = 0
    for config in configs:
        record: dict[str, Any]
        if config.gpu_count > gpus_available:
            record = {
                "configuration_id": config.id,
                "skipped": f"needs {config.gpu_count} GPUs, {gpus_available} here",
            }
        else:
            try:
                runners = build(config)
            except (RuntimeError, MemoryError) as error:  # e.g. CUDA out of memory
                record = {"configuration_id": config.id, "skipped": f"could not build: {error}"}
            else:
                try:
                    record = measure_configuration(config, runners, meter, rule)
                finally:
                    runners.release()
                if poster is not None:
                    record["quote_id"] = poster.post(record)
        if "skipped" in record:
            skipped += 1
            log(f"{config.id}: skipped ({record['skipped']})")
        else:
            measured += 1
            phases = record["phases"]
            log(
                f"{config.id}: {record['observation']['gpu_j']:.1f} J "
                f"(prefill {phases['prefill']['gpu_j']:.1f} J, decode "
                f"{phases['decode']['gpu_j']:.1f} J, spread {phases['request']['spread']:.1%})"
            )
        out.write(json.dumps(record) + "\n")
        out.flush()
    return measured, skipped
