"""Fields added to the request since quotes were first stored do not change, at their defaults,
what is stored or the Idempotency-Key fingerprint: a key stored before they existed still
replays its quote after an upgrade."""

from __future__ import annotations

import hashlib
import json

from service.db.engine import dump_json
from service.quotes.service import request_fingerprint, request_json
from service.schemas.estimate_request import EstimateRequest

BODY = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "workload": {"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256},
    "hardware": {"gpu": "H100-SXM5-80GB", "count": 2},
    "serving": {"flash_attention": True},
}
# The request as the service dumped it before cached_prompt_tokens and concurrent_sequences
# existed (every field, nulls included), and its fingerprint computed by hand from it.
BEFORE = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "architecture": None,
    "workload": {"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256},
    "hardware": {"gpu": "H100-SXM5-80GB", "count": 2, "parallelism": None},
    "precision": None,
    "serving": {"flash_attention": True, "engine": None},
    "datacenter": None,
    "metadata": None,
}


def _fingerprint_before(verbose: bool) -> str:
    text = json.dumps(
        {"request": BEFORE, "verbose": verbose}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_request_without_the_new_fields_keeps_its_old_fingerprint() -> None:
    request = EstimateRequest.model_validate(BODY)
    assert request_fingerprint(request, False) == _fingerprint_before(False)
    assert request_fingerprint(request, True) == _fingerprint_before(True)
    assert "cached_prompt_tokens" not in request_json(request, exclude_none=True)["workload"]


def test_parallelism_without_data_keeps_its_old_fingerprint() -> None:
    body = {**BODY, "hardware": {**BODY["hardware"], "parallelism": {"tensor": 2}}}
    before = {
        **BEFORE,
        "hardware": {
            **BEFORE["hardware"],
            "parallelism": {"tensor": 2, "expert": 1, "pipeline": 1},
        },
    }
    text = json.dumps({"request": before, "verbose": False}, sort_keys=True, separators=(",", ":"))
    request = EstimateRequest.model_validate(body)
    assert request_fingerprint(request, False) == hashlib.sha256(text.encode()).hexdigest()


def test_the_new_fields_change_the_fingerprint_when_they_are_used() -> None:
    plain = EstimateRequest.model_validate(BODY)
    cached = EstimateRequest.model_validate(
        {**BODY, "workload": {**BODY["workload"], "cached_prompt_tokens": 256}}
    )
    running = EstimateRequest.model_validate(
        {**BODY, "serving": {"flash_attention": True, "concurrent_sequences": 64}}
    )
    version = EstimateRequest.model_validate(
        {**BODY, "serving": {"flash_attention": True, "engine_version": "0.5.9"}}
    )
    prints = {request_fingerprint(r, False) for r in (plain, cached, running, version)}
    assert len(prints) == 4
    assert request_json(cached)["workload"]["cached_prompt_tokens"] == 256
    assert request_json(running)["serving"]["concurrent_sequences"] == 64


def _json_module_fingerprint(request: EstimateRequest, verbose: bool) -> str:
    """The fingerprint as the json module writes the canonical text (as it was first stored)."""
    payload = {"request": request_json(request), "verbose": verbose}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_fingerprint_is_the_json_modules_whatever_the_values() -> None:
    """The canonical text is the json module's, as fingerprints were first stored, whatever the
    values (small and large floats, escapes, non-ASCII)."""
    bodies = [
        BODY,
        {**BODY, "datacenter": {"region": "FR", "pue": 1.08, "utilisation": 0.5}},
        {**BODY, "metadata": {"tiny": 1e-05, "small": 0.00012, "big": 1e17, "n": 2**40}},
        {**BODY, "metadata": {"team": "Zürich", "quote": 'say "hi"\\n', "tab": "a\tb"}},
        {**BODY, "metadata": {"emoji": "\U0001f600", "e-mail": "a@b.c", "zeros": "0.00001"}},
    ]
    for body in bodies:
        request = EstimateRequest.model_validate(body)
        for verbose in (False, True):
            assert request_fingerprint(request, verbose) == _json_module_fingerprint(
                request, verbose
            )


def test_the_stored_request_leaves_out_the_new_fields_at_their_defaults() -> None:
    """The request a quote row stores (no nulls, the added fields at their defaults left out),
    byte for byte as written by hand, whether those fields were sent at their defaults or not."""
    stated = {
        **BODY,
        "workload": {**BODY["workload"], "cached_prompt_tokens": 0},
        "hardware": {**BODY["hardware"], "spec": None, "parallelism": {"tensor": 2, "data": None}},
        "serving": {
            "flash_attention": True,
            "concurrent_sequences": None,
            "engine_version": None,
            "disaggregated": None,
        },
    }
    left_out = {**BODY, "hardware": {**BODY["hardware"], "parallelism": {"tensor": 2}}}
    stored = (
        '{"model":"meta-llama/Llama-3.1-8B-Instruct",'
        '"workload":{"batch_size":8,"prompt_tokens":512,"output_tokens":256},'
        '"hardware":{"gpu":"H100-SXM5-80GB","count":2,'
        '"parallelism":{"tensor":2,"expert":1,"pipeline":1}},'
        '"serving":{"flash_attention":true}}'
    )
    for body in (stated, left_out):
        request = EstimateRequest.model_validate(body)
        assert dump_json(request_json(request, exclude_none=True)) == stored
    cached = EstimateRequest.model_validate(
        {**BODY, "workload": {**BODY["workload"], "cached_prompt_tokens": 64}}
    )
    assert dump_json(request_json(cached, exclude_none=True)["workload"]) == (
        '{"batch_size":8,"prompt_tokens":512,"output_tokens":256,"cached_prompt_tokens":64}'
    )
