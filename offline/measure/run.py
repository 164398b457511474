"""Running a plan: measure every configuration and write (or post) observations.

Each configuration gives one JSON line: the estimate request that prices what was run
(`plan.harness_request`: engine hf-transformers, layers split over one device per GPU of the
plan), the GPU energy and time of prefill, decode and the whole request (each repeated until
stable, with its spread), summed over exactly those GPUs, and the whole request's
`observation` in the body `POST /v1/quotes/{id}/observations` takes. With a service URL the
request is quoted there and the observation posted against the quote, only when both the
request and the quote are hf-transformers ones (`WrongEngine` otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO

from offline.measure.meter import EnergyMeter
from offline.measure.plan import HARNESS_ENGINE, PlannedConfiguration, harness_request
from offline.measure.stability import PhaseEnergy, StabilityRule, measure_phase
from offline.measure.workload import PhaseRunners

MEASURED_WITH = "nvml-total-energy (offline.measure)"
DEFAULT_RULE = StabilityRule()


class Poster(Protocol):
    def post(self, record: dict[str, Any]) -> str: ...


class WrongEngine(ValueError):
    """An observation of eager PyTorch about to be posted against another engine's quote."""


def engine_of(request: dict[str, Any]) -> str | None:
    """The `serving.engine` a request asks for (None: the service's default)."""
    return (request.get("serving") or {}).get("engine")


def quoted_engine(quote: dict[str, Any]) -> str | None:
    """The engine a quote was priced for (`validation.engine.value`, without ``==version``);
    None when the response carries no validation."""
    value = ((quote.get("validation") or {}).get("engine") or {}).get("value")
    return None if value is None else str(value).split("==")[0]


class ServicePoster:
    """Quotes each request on a running service and posts the observation against it, only
    for quotes asked for and priced as the harness's engine."""

    def __init__(
        self, base_url: str, key: str | None, timeout_s: float = 30.0, client: Any = None
    ) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = client or httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)

    def post(self, record: dict[str, Any]) -> str:
        if engine_of(record["request"]) != HARNESS_ENGINE:
            raise WrongEngine(
                f"{record['configuration_id']}: the request asks for "
                f"{engine_of(record['request'])}, the measurement is of {HARNESS_ENGINE}"
            )
        quoted = self.client.post("/v1/estimate", json=record["request"])
        quoted.raise_for_status()
        quote = quoted.json()
        if quoted_engine(quote) not in (None, HARNESS_ENGINE):
            raise WrongEngine(f"quote {quote['quote_id']} was priced for {quoted_engine(quote)}")
        quote_id = str(quote["quote_id"])
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
    config: PlannedConfiguration,
    request: dict[str, Any],
    runners: PhaseRunners,
    meter: EnergyMeter,
    rule: StabilityRule,
) -> dict[str, Any]:
    """The measurement record of one configuration, run as `request` prices it."""
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
        "request": request,
        "engine": HARNESS_ENGINE,
        "gpu_count": config.gpu_count,
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
    meters: Callable[[int], EnergyMeter],
    build: Callable[[PlannedConfiguration, list[str]], PhaseRunners],
    out: TextIO,
    *,
    rule: StabilityRule = DEFAULT_RULE,
    devices_available: int = 1,
    device_kind: str = "cuda",
    engine_version: str = "unknown",
    poster: Poster | None = None,
    log: Callable[[str], None] = print,
) -> tuple[int, int]:
    """Measure every configuration on one device per GPU of it (``cuda:0`` .. ``cuda:N-1``,
    metered by `meters(N)` on exactly those), one JSON line each (skipped ones say why);
    returns (measured, skipped)."""
    measured = skipped = 0
    for config in configs:
        record: dict[str, Any]
        request = harness_request(config, engine_version)
        if isinstance(request, str):
            record = {"configuration_id": config.id, "skipped": request}
        elif config.gpu_count > devices_available:
            record = {
                "configuration_id": config.id,
                "skipped": f"needs {config.gpu_count} GPUs, {devices_available} here",
            }
        else:
            devices = [f"{device_kind}:{i}" for i in range(config.gpu_count)]
            try:
                runners = build(config, devices)
            except (RuntimeError, MemoryError) as error:  # e.g. CUDA out of memory
                record = {"configuration_id": config.id, "skipped": f"could not build: {error}"}
            else:
                try:
                    meter = meters(config.gpu_count)
                    record = measure_configuration(config, request, runners, meter, rule)
                finally:
                    runners.release()
                record["devices"] = devices
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
