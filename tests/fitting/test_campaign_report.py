"""The campaign report's pairs: kernel power measured as the fit's reader takes it (the trace
mean, too few updates left out), batch energy only where the span was long enough, a cut model
quoted as a custom architecture of its layers."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline.fitting.campaign_rows import phases_by_item
from offline.measure.budget import CampaignRun
from offline.measure.campaign_output import Campaign, read_campaign
from offline.validation.campaign_report import end_to_end, kernel_pairs, quote_request
from service.catalog import load_model_catalog
from tests.measure.campaign_support import alternating_trace, write_test_campaign

H200 = "H200-SXM-141GB"


def phase_rows(
    case: str, model: str, layers: int, delta: int, request_s: float
) -> list[dict[str, object]]:
    common = {"item": f"{case} b=4", "case": case, "model": model, "num_layers": layers}
    common |= {"layers_delta": delta, "batch_size": 4, "prompt_tokens": 512, "output_tokens": 64}
    times = {"prefill": 0.1, "decode": request_s - 0.1, "request": request_s}
    return [{**common, "phase": p, "gpu_j": 300.0 * t, "time_s": t} for p, t in times.items()]


def campaign(tmp_path: Path) -> Campaign:
    run = CampaignRun()
    run.rows["gemm_perf"] = [
        {"item": f"g{m}", "m": m, "n": 28672, "k": 4096, "gemm_dtype": "bfloat16"}
        | {"latency": 1.0, "power": 999.0}
        for m in (4096, 8192)
    ]
    # 490 and 510 W alternating every 100 ms: a mean of 500 W, over 10 updates and over 4.
    run.rows["power_samples"] = [
        *alternating_trace("g4096", 500.0),
        *alternating_trace("g8192", 500.0, updates=4),
    ]
    run.rows["end_to_end"] = phase_rows("moe", "Qwen/Qwen3-30B-A3B", 12, -36, 1.5) + phase_rows(
        "dense-gqa", "meta-llama/Llama-3.1-8B-Instruct", 32, 0, 0.5
    )
    return read_campaign(write_test_campaign(tmp_path / "c", run, gpu=H200))


def test_kernel_power_is_the_trace_mean_and_needs_five_updates(tmp_path: Path) -> None:
    (op, (time_pairs, power_pairs)), *rest = kernel_pairs([campaign(tmp_path)]).items()
    assert op == "gemm bfloat16" and not rest
    assert time_pairs.measured == pytest.approx([1e-3, 1e-3])  # 1 ms each, both rows
    # 10 updates of 490/510 W: 500 W (not the counter's 999 W); 4 updates: no power pair.
    assert power_pairs.measured == pytest.approx([500.0])


def test_batches_are_quoted_and_short_spans_give_no_energy(tmp_path: Path) -> None:
    found = campaign(tmp_path)
    moe_phases = phases_by_item(found)["moe b=4"]
    request = quote_request(moe_phases, H200, load_model_catalog())
    assert request.model is None and request.architecture is not None
    arch = request.architecture.model_dump()
    assert (arch["num_layers"], arch["num_moe_layers"], arch["num_experts"]) == (12, 12, 128)
    assert (request.workload.batch_size, request.serving and request.serving.engine) == (
        4,
        "hf-transformers",
    )
    moe, dense = end_to_end([found])
    # The meter updates every 0.1 s: the 1.5 s MoE request keeps its 450 J, the 0.5 s one not.
    assert moe.measured["GPU J (service)"] == pytest.approx(450.0)
    assert dense.measured["GPU J (service)"] is None
    assert dense.measured["TPOT s"] == pytest.approx(0.4 / 63)
    assert dense.label == "dense-gqa Llama-3.1-8B-Instruct b=4 p=512"
    assert moe.label == "moe Qwen3-30B-A3B (12 layers) b=4 p=512"
    assert all(value > 0 for value in moe.quoted.values())
