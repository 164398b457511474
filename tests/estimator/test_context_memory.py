"""The estimator remembers resolved request contexts (all but the workload): a remembered
context prices every workload exactly as a fresh resolution does, and the memory is bounded."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import service.pricing.estimator as estimator_module
from service.pricing.estimator import Estimator
from service.pricing.resolve import ResolvedRequest
from service.schemas.estimate_request import EstimateRequest

CONTEXT: dict[str, Any] = {
    "model": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "hardware": {"gpu": "A100-SXM4-80GB", "count": 4},
    "datacenter": {"region": "FR", "pue": 1.3},
}
WORKLOADS = [
    {"batch_size": 1, "prompt_tokens": 20, "output_tokens": 1},
    {"batch_size": 16, "prompt_tokens": 3000, "output_tokens": 400},
    {"batch_size": 3, "prompt_tokens": 512, "output_tokens": 64},
]
PER_QUOTE = {"created_at"}


def request(workload: dict[str, Any], **context: Any) -> EstimateRequest:
    return EstimateRequest.model_validate({**CONTEXT, **context, "workload": workload})


def answer(estimator: Estimator, body: EstimateRequest) -> dict[str, Any]:
    return estimator.estimate(body).response.model_dump(exclude=PER_QUOTE)


def test_a_remembered_context_prices_each_workload_as_a_fresh_one() -> None:
    remembering = Estimator.from_catalogues()
    for workload in WORKLOADS:  # one context, three workloads, in one estimator
        remembered = answer(remembering, request(workload))
        fresh = answer(Estimator.from_catalogues(), request(workload))
        assert remembered == fresh
    assert len(remembering._contexts) == 1
    # The workloads really differ: the memory did not return an earlier answer.
    energies = {answer(remembering, request(w))["energy"]["gpu_j"] for w in WORKLOADS}
    assert len(energies) == 3


def test_a_contexts_carbon_parts_are_made_once_and_shared() -> None:
    """The serialised factors and held-hardware rates are made by the first quote of a context
    and kept on its (remembered) carbon inputs: every later workload of it uses the same ones."""
    estimator = Estimator.from_catalogues()
    first = estimator.estimate(request(WORKLOADS[0])).document.factors
    inputs = estimator.resolve(request(WORKLOADS[1])).carbon
    assert inputs.priced_parts is not None and inputs.priced_parts[0] is first
    assert estimator.estimate(request(WORKLOADS[2])).document.factors is first
    elsewhere = estimator.estimate(request(WORKLOADS[0], datacenter={"region": "DE"}))
    assert elsewhere.document.factors.id != first.id


def test_an_explicit_default_is_another_context() -> None:
    """`hardware.count` given or defaulted gives the same numbers but a different list of
    defaulted inputs, so the two are remembered apart."""
    estimator = Estimator.from_catalogues()
    implicit = request(WORKLOADS[0], hardware={"gpu": "A100-SXM4-80GB"})
    explicit = request(WORKLOADS[0], hardware={"gpu": "A100-SXM4-80GB", "count": 1})
    assert estimator.resolve(implicit).defaulted["hardware.count"] == 1
    assert "hardware.count" not in estimator.resolve(explicit).defaulted
    assert len(estimator._contexts) == 2


def test_the_memory_is_cleared_when_full(monkeypatch: Any) -> None:
    monkeypatch.setattr(estimator_module, "MAX_CONTEXTS", 2)
    estimator = Estimator.from_catalogues()
    for region in ("FR", "DE", "US-CA"):
        estimator.estimate(request(WORKLOADS[0], datacenter={"region": region}))
    assert len(estimator._contexts) == 1  # the third context found it full: cleared, then added


def test_a_remembered_resolution_keeps_every_field_but_the_requests_own() -> None:
    # Every field a distinct object: one the copy left out would come back as its default.
    values: dict[str, Any] = {f.name: object() for f in fields(ResolvedRequest)}
    values["notes"] = ["a remembered note"]
    known = ResolvedRequest(**values)
    workload, defaulted = object(), {"workload.cached_prompt_tokens": 0}
    copied = estimator_module._with_workload(known, workload, defaulted)  # type: ignore[arg-type]
    for name, value in values.items():
        expected = {"workload": workload, "defaulted": defaulted}.get(name, value)
        if name == "notes":
            assert copied.notes == known.notes and copied.notes is not known.notes
        else:
            assert getattr(copied, name) is expected, name
