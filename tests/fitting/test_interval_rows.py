"""How the held-out sources map onto requests (shared/data/README.md), and the intervals file
built from hand-made rows."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from offline.fitting.argonne_rows import _request as argonne_request
from offline.fitting.engine_profiles import Run
from offline.fitting.held_out_rows import HeldOutRow
from offline.fitting.interval_report import coverage_report
from offline.fitting.intervals import intervals_document
from offline.fitting.silicon_levels import _priced as priced_rows
from offline.fitting.silicon_rows import point_estimator, silicon_request, unpriceable
from service.catalog.engines import load_engine_coefficients
from service.catalog.gpus import load_gpu_catalog

SILICON_ROW = {
    "silicon_data_source": "db-dump/2026-04-27; config_id=81; silicon_concurrency=16; x=1",
    "backend": "sglang",
    "model_path": "Qwen/Qwen3-32B",
    "system": "h200_sxm",
    "precision": "fp4",
    "mode": "agg",
    "isl": "1024",
    "osl": "512",
    "batch_size": "4",
    "tp_size": "2",
    "pp_size": "1",
    "attention_dp_size": "1",
    "moe_ep_size": "1",
}


def test_a_silicon_run_is_one_request_joining_its_concurrency() -> None:
    request = silicon_request(SILICON_ROW)
    assert request.workload.batch_size == 1
    assert (request.workload.prompt_tokens, request.workload.output_tokens) == (1024, 512)
    assert request.serving is not None and request.serving.concurrent_sequences == 16
    assert (request.hardware.gpu, request.hardware.count) == ("H200-SXM-141GB", 2)
    assert request.precision is not None and request.precision.weights == "mxfp4"
    assert silicon_request(SILICON_ROW, "sglang").serving.engine == "sglang"  # type: ignore[union-attr]


def test_silicon_runs_the_request_cannot_say_are_left_out() -> None:
    assert unpriceable(SILICON_ROW) == ""
    assert unpriceable({**SILICON_ROW, "mode": "disagg"}) == "disaggregated serving"
    assert unpriceable({**SILICON_ROW, "pp_size": "2"}) == "pipeline parallelism"
    assert unpriceable({**SILICON_ROW, "attention_dp_size": "8", "moe_ep_size": "8"}) == ""


def test_a_silicon_runs_parallelism_is_the_requests() -> None:
    # DeepSeek-style: attention DP 8 x tensor 1 on 8 GPUs, experts over all 8; without a
    # recorded concurrency the server runs batch_size per attention replica: 4 x 8 = 32.
    row = {
        **SILICON_ROW,
        "silicon_data_source": "db-dump",
        "tp_size": "1",
        "attention_dp_size": "8",
        "moe_ep_size": "8",
    }
    request = silicon_request(row)
    assert request.hardware.count == 8
    assert request.hardware.parallelism is not None
    assert request.hardware.parallelism.model_dump() == {
        "tensor": 1,
        "expert": 8,
        "pipeline": 1,
        "data": 8,
    }
    assert request.serving is not None and request.serving.concurrent_sequences == 32


def test_an_argonne_run_is_a_static_batch_on_mi250_cards() -> None:
    row = {
        "Model": "meta-llama/Llama-2-70b-hf",
        "Input Output Length": "256",
        "Batch Size": "8",
        "Num of Hardware": "2",
    }
    request = argonne_request(row)
    assert (request.workload.batch_size, request.workload.prompt_tokens) == (8, 256)
    assert request.workload.output_tokens == 256
    assert (request.hardware.gpu, request.hardware.count) == ("MI250", 2)
    # vLLM v0.6.1, float16 (the benchmark's MI250 README and script)
    assert request.serving is not None and request.serving.engine == "vllm"
    assert request.serving.engine_version == "0.6.1"
    assert request.precision is not None and request.precision.weights == "fp16"
    mi250 = load_gpu_catalog().get("MI250")
    assert mi250.raw["vendor"] == "AMD"
    assert mi250.spec.memory_bandwidth_bytes_per_s == pytest.approx(3.2768e12)


def test_the_file_states_each_levels_quantiles_or_its_fallbacks() -> None:
    # 40 family rows of each quantity, scores -0.39..0.39: bounds exp(-0.33), exp(0.33)
    # (n = 40: the 4th and 37th smallest); no other level has rows, so all fall back to family.
    scores = [round(-0.39 + 0.02 * i, 2) for i in range(40)]
    rows = [
        HeldOutRow("family", "llama", q, "test", f"r{i}", math.exp(s), 1.0, "g", "e", "bf16", "f")
        for q in ("energy", "prefill", "ttft", "tpot", "total")
        for i, s in enumerate(scores)
    ]
    sets = {"vendor": frozenset({"NVIDIA"}), "gpu": frozenset({"g"})}
    document = intervals_document(rows, sets, {"x.csv": "0" * 64})
    for level in ("family", "custom", "precision", "engine", "gpu", "vendor"):
        fitted = document["levels"][level]["tpot"]
        assert fitted["fitted_level"] == "family"
        assert (fitted["lower_ratio"], fitted["upper_ratio"]) == (
            round(math.exp(-0.33), 4),
            round(math.exp(0.33), 4),
        )
    assert document["backing"]["gpu"] == {"g": {"test": 40}}
    assert document["fitted_on"]["gpu"] == ["g"]


def test_a_quantised_variant_counts_under_its_catalogued_family() -> None:
    # aiconfigurator names NVIDIA's and Qwen's FP8 repos; the service prices them as variants
    # of Llama-3.1-8B-Instruct and Qwen3-235B-A22B, so their rows back those families.
    estimator = point_estimator()
    assert estimator.model_family("nvidia/Llama-3.1-8B-Instruct-FP8") == "llama"
    assert estimator.model_family("Qwen/Qwen3-235B-A22B-FP8") == "qwen"
    assert estimator.model_family("acme/unheard-of-model") == "custom"  # not catalogued


def test_a_silicon_run_is_priced_with_its_own_engines_profile() -> None:
    # An SGLang run on H100: its rows carry the engine `sglang` and the catalogued family, and
    # their predictions are what the service quotes for the same request with engine sglang
    # (its own profile, TTFT terms included), not vllm-v1's.
    row = {
        **SILICON_ROW,
        "system": "h100_sxm",
        "precision": "fp8",
        "silicon_ttft_ms": "200",
        "silicon_tpot_ms": "20",
    }
    profile = load_engine_coefficients()["sglang"]
    rows = priced_rows("family", "qwen", "sglang", profile, [Run(7, row)])
    assert {(r.level, r.group, r.engine, r.family, r.gpu) for r in rows} == {
        ("family", "qwen", "sglang", "qwen", "H100-SXM5-80GB")
    }
    # total = TTFT + (osl - 1) x TPOT = 0.2 + 511 x 0.02 = 10.42 s
    assert {r.quantity: r.measured for r in rows}["total"] == pytest.approx(10.42)
    quote = point_estimator().price([silicon_request(row, "sglang")])[0]
    latency = quote.document.as_dict()["latency"]  # type: ignore[union-attr]
    predicted = {r.quantity: r.predicted for r in rows}
    assert predicted["ttft"] == pytest.approx(latency["prefill_s"])
    assert predicted["total"] == pytest.approx(latency["total_s"])
    as_vllm = point_estimator().price([silicon_request(row)])[0]
    default = as_vllm.document.as_dict()["latency"]  # type: ignore[union-attr]
    assert predicted["ttft"] != pytest.approx(default["prefill_s"], rel=0.05)


def test_the_report_gives_each_cells_coverage_and_median_width() -> None:
    # Family tpot: groups a and c at score 0, b at 0.5 (30 rows each). Without b, the bounds
    # of a and c are (0, 0): b's rows fall outside, width 1. Without a (or c), two groups at
    # the nominal 0.1 (no cell of three groups to learn another): n = 60, the 6th and 55th
    # smallest, 0 and 0.5: inside, width e^0.5 = 1.65. Inside 60 of 90 = 67 %, 13 points
    # under 80 %; the median width is 1.65 (60 of 90 rows).
    rows = [
        HeldOutRow("family", g, "tpot", "test", f"{g}{i}", math.exp(s), 1.0, "h", "e", "bf16", g)
        for g, s in (("a", 0.0), ("b", 0.5), ("c", 0.0))
        for i in range(30)
    ]
    document = {"provenance": {"command": "python -m x", "created_at": "now"}, "levels": {}}
    report = coverage_report(rows, document, Counter(), (0.1, 0.9))
    assert "| model family held out | tpot | 90 | 67 % | 1.65 |" in report
    assert "More than 10 points from 80 %: model family held out tpot (67 %)." in report
