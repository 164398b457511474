"""Each quote's intervals are those of the evidence level behind its case, read from
service/catalog/data/intervals.json, and its `validation` says what backs it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import orjson
import pytest

from offline.fitting.conformal import MIN_ROWS
from service.catalog.intervals import (
    COMPOUNDS,
    INTERVALS_PATH,
    QUANTITIES,
    EvidenceIntervals,
    LevelInterval,
    compound_log_bounds,
    load_intervals,
)
from service.pricing.estimator import Estimator
from service.pricing.evidence import LEVELS, Case, bound_ratios, case_evidence, evidence_level
from service.schemas.estimate_request import EstimateRequest

FITTED = {
    "vendor": frozenset({"NVIDIA"}),
    "gpu": frozenset({"H100-SXM5-80GB", "A100-SXM4-40GB"}),
    "engine": frozenset({"vllm-v1"}),
    "precision": frozenset({"bf16"}),
    "family": frozenset({"llama"}),
}


@pytest.mark.parametrize(
    ("case", "level"),
    [
        (Case("MI300X", "AMD", "vllm-v1", "bf16", "llama"), "vendor"),
        (Case("H200-SXM-141GB", "NVIDIA", "vllm-v1", "bf16", "llama"), "gpu"),
        (Case("H100-SXM5-80GB", "NVIDIA", "sglang", "fp8", "llama"), "engine"),
        (Case("H100-SXM5-80GB", "NVIDIA", "vllm-v1", "mxfp4", "custom"), "precision"),
        (Case("H100-SXM5-80GB", "NVIDIA", "vllm-v1", "bf16", "custom"), "custom"),
        (Case("A100-SXM4-40GB", "NVIDIA", "vllm-v1", "bf16", "qwen"), "family"),
        (Case("A100-SXM4-40GB", "NVIDIA", "vllm-v1", "bf16", "llama"), "family"),
    ],
)
def test_a_case_takes_the_widest_level_it_needs(case: Case, level: str) -> None:
    assert evidence_level(case, FITTED) == level


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.from_catalogues()


@pytest.fixture(scope="module")
def stored() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(INTERVALS_PATH.read_text(encoding="utf-8"))
    return document


def quote(estimator: Estimator, body: dict[str, Any]) -> dict[str, Any]:
    priced = estimator.estimate(EstimateRequest.model_validate(body))
    document: dict[str, Any] = orjson.loads(priced.document.text())
    return document


def workload() -> dict[str, int]:
    return {"batch_size": 4, "prompt_tokens": 512, "output_tokens": 128}


def test_the_file_states_every_level_and_quantity_with_provenance(stored: dict[str, Any]) -> None:
    assert (stored["lower_quantile"], stored["upper_quantile"]) == (0.1, 0.9)
    assert set(stored["levels"]) == set(LEVELS)
    for by_quantity in stored["levels"].values():
        assert set(by_quantity) == set(QUANTITIES)
        for fitted in by_quantity.values():
            assert 0.0 < fitted["lower_ratio"] < fitted["upper_ratio"]
            assert fitted["rows"] >= MIN_ROWS and fitted["groups"] >= 1
    assert stored["provenance"]["data_sha256"]
    assert stored["provenance"]["command"].startswith("python -m offline.fitting.intervals")


def test_an_h200_quote_takes_the_gpu_levels_quantiles(
    estimator: Estimator, stored: dict[str, Any]
) -> None:
    document = quote(
        estimator,
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "hardware": {"gpu": "H200-SXM-141GB"},
            "workload": workload(),
        },
    )
    gpu_level = stored["levels"]["gpu"]
    latency, energy = document["latency"], document["energy"]
    for name, quantity in (
        ("total_s", "total"),
        ("prefill_s", "prefill"),
        ("time_per_output_token_s", "tpot"),
        ("decode_s", "tpot"),
    ):
        fitted = gpu_level[quantity]
        assert latency[f"{name}_low"] == pytest.approx(
            latency[name] * min(fitted["lower_ratio"], 1)
        )
        assert latency[f"{name}_high"] == pytest.approx(
            latency[name] * max(fitted["upper_ratio"], 1)
        )
    fitted = gpu_level["energy"]
    assert energy["gpu_j_low"] == pytest.approx(energy["gpu_j"] * min(fitted["lower_ratio"], 1))
    assert energy["gpu_j_high"] == pytest.approx(energy["gpu_j"] * max(fitted["upper_ratio"], 1))
    validation = document["validation"]
    assert validation["level"] == "gpu"
    assert validation["gpu"]["value"] == "H200-SXM-141GB"
    assert validation["gpu"]["fitted_on"] is False
    assert validation["gpu"]["measured_rows"]["aiconfigurator-silicon"] > 0
    assert validation["held_out"]["total"]["rows"] == gpu_level["total"]["rows"]


def test_an_amd_gpu_is_the_vendor_level_and_a_custom_model_the_custom_one(
    estimator: Estimator, stored: dict[str, Any]
) -> None:
    amd = quote(
        estimator,
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "hardware": {"gpu": "MI300X"},
            "workload": workload(),
        },
    )
    assert amd["validation"]["level"] == "vendor"
    ratio = max(stored["levels"]["vendor"]["total"]["upper_ratio"], 1)
    assert amd["latency"]["total_s_high"] == pytest.approx(amd["latency"]["total_s"] * ratio)
    architecture = {
        "hidden_size": 2048,
        "num_layers": 16,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "intermediate_size": 8192,
        "vocab_size": 32000,
    }
    custom = quote(
        estimator,
        {
            "architecture": architecture,
            "hardware": {"gpu": "H100-SXM5-80GB"},
            "workload": workload(),
        },
    )
    assert custom["validation"]["level"] == "custom"
    # Custom architectures are backed by the held-out rows priced from a config (if any).
    assert custom["validation"]["model_family"] == {
        "value": "custom",
        "fitted_on": False,
        "measured_rows": stored["backing"]["family"].get("custom", {}),
    }


def test_bounds_widen_a_one_sided_interval_to_bracket_the_estimate() -> None:
    # A level whose held-out rows all measured above the estimate: ratios 1.2..1.5, so a
    # 10 s estimate is bounded 10..15 s (x1.2 widened to x1).
    biased = LevelInterval("gpu", "gpu", 1.2, 1.5, 40, 2, 30.0)
    assert bound_ratios(biased) == (1.0, 1.5)
    both_sides = LevelInterval("gpu", "gpu", 0.8, 1.25, 40, 2, 12.0)
    assert bound_ratios(both_sides) == pytest.approx((0.8, 1.25))


def test_the_loader_keys_intervals_by_level_and_quantity() -> None:
    known = load_intervals()
    for level in LEVELS:
        for quantity in QUANTITIES:
            interval = known.interval(level, quantity)
            assert interval.level == level
            assert interval.fitted_level in LEVELS


def test_a_static_prefill_and_a_serving_ttft_take_their_own_residuals() -> None:
    # prefill of a static batch held out within x0.8..x1.25, TTFT under load x2..x10 (queueing);
    # the other quantities x0.9..x1.1. A 0.5 s prefill: static 0.4..0.625 s; serving 0.5..5 s
    # (x2 widened to x1: bounds bracket the estimate).
    ratios = {"prefill": (0.8, 1.25), "ttft": (2.0, 10.0)}
    intervals = {
        (level, q): LevelInterval(level, level, *ratios.get(q, (0.9, 1.1)), 40, 2, 10.0)
        for level in LEVELS
        for q in QUANTITIES
    }
    known = EvidenceIntervals(0.1, 0.9, FITTED, intervals, {})
    case = Case("H100-SXM5-80GB", "NVIDIA", "vllm-v1", "bf16", "llama")
    static, serving = case_evidence(case, known), case_evidence(case, known, serving=True)
    assert set(static.intervals) == set(serving.intervals) == {"energy", "prefill", "tpot", "total"}
    assert static.ratios["prefill"] == pytest.approx((0.4 / 0.5, 0.625 / 0.5))
    assert serving.ratios["prefill"] == pytest.approx((0.5 / 0.5, 5.0 / 0.5))
    assert static.intervals["tpot"] == serving.intervals["tpot"]
    assert serving.validation["held_out"]["prefill"]["upper_ratio"] == 10.0
    assert static.validation["held_out"]["prefill"]["upper_ratio"] == 1.25


def test_a_quote_joining_a_server_bounds_prefill_by_ttft_under_load(
    estimator: Estimator, stored: dict[str, Any]
) -> None:
    body: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "hardware": {"gpu": "H100-SXM5-80GB"},
        "workload": workload(),
    }
    static = quote(estimator, body)["latency"]
    serving = quote(estimator, {**body, "serving": {"concurrent_sequences": 32}})["latency"]
    family = stored["levels"]["family"]
    for latency, quantity in ((static, "prefill"), (serving, "ttft")):
        high = latency["prefill_s"] * max(family[quantity]["upper_ratio"], 1)
        assert latency["prefill_s_high"] == pytest.approx(high)


def test_two_levels_compound_their_log_bounds_by_the_files_rule() -> None:
    # ln-bounds a = (-0.3, 0.2), b = (-0.4, 0.1): envelope (-0.4, 0.2); sum (-0.7, 0.3);
    # root of sum of squares (-0.5, sqrt(0.04 + 0.01) = 0.2236). A one-sided (0.1, 0.5) is
    # widened to (0, 0.5) first.
    a, b = (-0.3, 0.2), (-0.4, 0.1)
    assert compound_log_bounds(a, b, "alone") == pytest.approx(a)
    assert compound_log_bounds(a, b, "widest") == pytest.approx((-0.4, 0.2))
    assert compound_log_bounds(a, b, "sum") == pytest.approx((-0.7, 0.3))
    assert compound_log_bounds(a, b, "rss") == pytest.approx((-0.5, 0.2236068))
    assert compound_log_bounds((0.1, 0.5), b, "sum") == pytest.approx((-0.4, 0.6))
    with pytest.raises(ValueError, match="unknown compound rule"):
        compound_log_bounds(a, b, "product")


def test_a_first_gpu_under_a_version_never_measured_compounds_with_the_engine_level() -> None:
    # GPU level x0.8..x1.25 (ln -0.2231, 0.2231), engine level x0.5..x1.5 (ln -0.6931,
    # 0.4055), every other level x0.9..x1.1. An H200 quote under vllm==0.6.1 priced with the
    # vllm-v1 profile: under `sum` ln (-0.9163, 0.6286), x0.4..x1.875; under `widest`
    # x0.5..x1.5; `alone` (the default) the GPU level's x0.8..x1.25. The same version on a
    # fitted GPU is the engine level, enveloped with its profile's case (family,
    # x0.9..x1.1): x0.5..x1.5 under any rule.
    ratios = {"gpu": (0.8, 1.25), "engine": (0.5, 1.5)}
    intervals = {
        (level, q): LevelInterval(level, level, *ratios.get(level, (0.9, 1.1)), 40, 2, 10.0)
        for level in LEVELS
        for q in QUANTITIES
    }
    first_gpu = Case("H200-SXM-141GB", "NVIDIA", "vllm==0.6.1", "bf16", "llama", "vllm-v1")
    fitted_gpu = replace(first_gpu, gpu="H100-SXM5-80GB")
    summed = EvidenceIntervals(0.1, 0.9, FITTED, intervals, {}, compound="sum")
    widest = EvidenceIntervals(0.1, 0.9, FITTED, intervals, {}, compound="widest")
    total = case_evidence(first_gpu, summed).intervals["total"]
    assert (total.lower_ratio, total.upper_ratio) == pytest.approx((0.4, 1.875))
    total = case_evidence(first_gpu, widest).intervals["total"]
    assert (total.lower_ratio, total.upper_ratio) == pytest.approx((0.5, 1.5))
    alone = EvidenceIntervals(0.1, 0.9, FITTED, intervals, {})
    assert case_evidence(first_gpu, alone).intervals["total"] == intervals[("gpu", "total")]
    for known in (summed, widest):
        engine = case_evidence(fitted_gpu, known)
        assert engine.level == "engine"
        assert (engine.intervals["total"].lower_ratio, engine.intervals["total"].upper_ratio) == (
            pytest.approx((0.5, 1.5))
        )
    # a version that was measured (no profile of another version) is the GPU level's alone
    measured = replace(first_gpu, engine="vllm-v1", profile="")
    total = case_evidence(measured, summed).intervals["total"]
    assert (total.lower_ratio, total.upper_ratio) == pytest.approx((0.8, 1.25))


def test_the_file_states_its_compound_rule(stored: dict[str, Any]) -> None:
    assert stored["compound_rule"] in COMPOUNDS
    assert load_intervals().compound == stored["compound_rule"]
