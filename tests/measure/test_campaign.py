"""The 8-minute campaign on the CPU: its time budget, its kernels and models run by real torch,
the files it writes and their provenance, and its refusal without a GPU.

`ConstantPowerMeter` stands in for NVML, absent here: a board drawing a constant 100 W, so
the energy of a loop is 100 W x its wall time (the meter is the only test double).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from offline.measure.budget import Item, Tables, run_within_budget
from offline.measure.campaign import DEFAULT_BUDGET_S, PlanOnly, campaign_items, main, provenance
from offline.measure.campaign_kernels import KernelContext, KernelGrid, kernel_items
from offline.measure.campaign_models import (
    CAMPAIGN_RULE,
    PLAN_METER_PERIOD_S,
    ModelCase,
    model_item,
)
from offline.measure.campaign_output import (
    InvalidCampaign,
    committed_campaigns,
    read_campaign,
    write_campaign,
)
from offline.measure.power_trace import MeterPeriod
from offline.validation.kernel_ops import MAPPERS
from offline.validation.kernel_pricing import PricingContext, price_table
from offline.validation.kernel_tables import KernelTable, KernelTableFile
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import load_cost_model_coefficients

WATTS = 100.0


class ConstantPowerMeter:
    name = "constant 100 W board"

    def __init__(self) -> None:
        self.power_source = "constant"

    def read_j(self) -> float:
        return WATTS * time.perf_counter()

    def power_w(self) -> float:
        return WATTS


def in_read_gaps(ratio: float) -> bool:
    """A constant board's measured / true power over a 50 ms loop: never below 1 (the
    energy's window holds the loop's; 1e-9 for the counter's float rounding), and above it
    only by the gaps between the counter's and the clock's reads (under 10 %: 5 ms)."""
    return 1.0 - 1e-9 <= ratio < 1.1


class SteppingMeter(ConstantPowerMeter):
    """A board whose reading alternates 90 and 110 W every 50 ms: a meter that updates every
    50 ms."""

    name = "stepping board"

    def power_w(self) -> float:
        return 90.0 if int(time.perf_counter() / 0.05) % 2 else 110.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def item(clock: Clock, id_: str, planned_s: float, actual_s: float, fail: bool = False) -> Item:
    def run() -> Tables:
        clock.now += actual_s
        if fail:
            raise RuntimeError("CUDA out of memory")
        return {"t": [{"id": id_}]}

    return Item(id_, "t", planned_s, run)


def test_the_budget_skips_what_would_overrun_scaled_by_the_overrun_so_far() -> None:
    clock = Clock()
    items = [
        item(clock, "a", 10, 20),  # ran twice as long as planned: factor 2
        item(clock, "b", 10, 10),  # expected 20 s, 20 s left: runs; factor 30/20 = 1.5
        item(clock, "c", 10, 10),  # expected 15 s, 10 s left: skipped
        item(clock, "d", 50, 1),  # expected 75 s: skipped
        item(clock, "e", 4, 3, fail=True),  # expected 6 s, 10 s left: runs, fails
        item(clock, "f", 4, 1),  # factor 33/24 = 1.375: expected 5.5 s, 7 s left: runs
    ]
    run = run_within_budget(items, 40.0, clock=clock, progress=False)
    assert [(e.id, e.status) for e in run.log] == [
        ("a", "done"),
        ("b", "done"),
        ("c", "skipped"),
        ("d", "skipped"),
        ("e", "failed"),
        ("f", "done"),
    ]
    assert run.log[2].reason == "would overrun: 15.0 s expected, 10.0 s left"
    assert "CUDA out of memory" in run.log[4].reason and run.log[4].actual_s == 3
    assert run.rows == {"t": [{"id": "a"}, {"id": "b"}, {"id": "f"}]}
    assert clock.now == 34.0


def test_an_interrupt_keeps_what_was_measured_and_lists_the_rest() -> None:
    clock = Clock()

    def interrupted() -> Tables:
        clock.now += 2
        raise KeyboardInterrupt

    items = [
        item(clock, "a", 10, 5),
        Item("b", "t", 10, interrupted),
        item(clock, "c", 10, 5),
    ]
    run = run_within_budget(items, 100.0, clock=clock, progress=False)
    assert [(e.id, e.status, e.reason) for e in run.log] == [
        ("a", "done", ""),
        ("b", "failed", "interrupted"),
        ("c", "skipped", "interrupted"),
    ]
    assert run.log[1].actual_s == 2
    assert run.rows == {"t": [{"id": "a"}]}


def test_the_planned_campaign_fits_its_budget_on_h100_and_h200() -> None:
    for gpu in ("H100-SXM5-80GB", "H200-SXM-141GB"):
        items = campaign_items(PlanOnly(), gpu, "cuda:0", 0.8, MeterPeriod(PLAN_METER_PERIOD_S))
        kinds = {i.kind for i in items}
        # 58 kernel loops of 10 planned meter periods (1.0 s): 0.15 + 1.0 + 0.3 s each.
        kernels = [i.planned_s for i in items if i.kind != "end_to_end"]
        assert (len(kernels), sum(kernels)) == (58, pytest.approx(58 * 1.45))
        assert kinds == {"gemm_perf", "context_attention_perf", "generation_attention_perf"} | {
            "moe_perf",
            "end_to_end",
        }
        planned = sum(i.planned_s for i in items)
        # Planned at two thirds of the budget at most: room for items that run slower.
        assert planned <= DEFAULT_BUDGET_S * 2 / 3, (gpu, planned)
    assert DEFAULT_BUDGET_S + 30 <= 8 * 60  # start-up and writing inside the 8 minutes


TINY = KernelGrid(
    gemm_m_bf16=(4,),
    gemm_m_fp8=(16,),
    gemm_shapes=((32, 16),),
    heads=(4, 2, 8),
    context_isl=(16,),
    generation=((2, 24),),
    moe=(16, 8, 4, 2),
    moe_tokens=(8,),
)


def test_kernels_run_on_the_cpu_and_price_like_aiconfigurator_tables() -> None:
    pytest.importorskip("torch")
    ctx = KernelContext(
        "cpu",
        ConstantPowerMeter(),
        lambda: None,
        MeterPeriod(guess_s=0.001),  # 10 periods: 10 ms, under the 50 ms loop_s
        loop_s=0.05,
        warmup_s=0.01,
        sample_period_s=0.005,
    )
    run = run_within_budget(kernel_items(ctx, TINY), 60.0, progress=False)
    assert ctx.period.detected_s is None  # a constant trace shows no update
    assert [e.status for e in run.log] == ["done"] * 5
    gemm, fp8 = run.rows["gemm_perf"]
    assert fp8["gemm_dtype"] == "fp8" and fp8["m"] == 16
    assert (gemm["m"], gemm["n"], gemm["k"], gemm["gemm_dtype"]) == (4, 32, 16, "bfloat16")
    # The counter is read before the loop's clock at the start and after it at the end, so
    # the energy's window holds the loop's: energy / time is at least the board's 100 W, and
    # above it only by the two reads' gaps (microseconds, a few ms when a shared VM stalls)
    # over the 50 ms loop.
    assert in_read_gaps(gemm["power"] / WATTS)  # energy / time of the loop
    assert gemm["power_sampled_p50"] == WATTS and gemm["power_samples"] >= 1
    assert in_read_gaps(gemm["energy_per_call_j"] / (WATTS * gemm["latency"] / 1000.0))
    assert gemm["launch"] == "eager"  # CUDA graphs only on a GPU
    traced = {r["item"] for r in run.rows["power_samples"]}
    assert traced == {e.id for e in run.log if e.status == "done"}
    # The rows are what offline.validation prices: every one maps onto cost-model kernels.
    h100 = load_gpu_catalog().get("H100-SXM5-80GB").spec
    context = PricingContext(h100, load_cost_model_coefficients())
    for table in ("gemm_perf", "context_attention_perf", "generation_attention_perf", "moe_perf"):
        rows = run.rows[table]
        columns = {name: [r[name] for r in rows] for name in rows[0]}
        file = KernelTableFile(f"campaign/{table}", "campaign", "", "hf-transformers", "", table)
        priced = price_table(KernelTable(file, columns), MAPPERS[table], context)
        assert not priced.skipped and len(priced.measured_w) == len(rows), table
        assert all(in_read_gaps(w / WATTS) for w in priced.measured_w), table


def test_kernel_traces_show_the_meter_period_and_lengthen_the_loops() -> None:
    pytest.importorskip("torch")
    period = MeterPeriod(guess_s=0.001)
    ctx = KernelContext("cpu", SteppingMeter(), lambda: None, period, loop_s=1.0, warmup_s=0.01)
    grid = replace(TINY, gemm_m_fp8=())
    run = run_within_budget(kernel_items(ctx, grid)[:1], 60.0, progress=False)
    assert run.log[0].status == "done", run.log
    # A 1 s loop sampled every 2 ms sees the reading change every 50 ms (about 20 times); the
    # median interval holds against the sampler's jitter on a busy machine.
    samples = len(run.rows["power_samples"])
    assert period.detected_s == pytest.approx(0.05, rel=0.2), samples
    assert ctx.timed_loop_s == pytest.approx(1.0)  # 10 periods (0.5 s) < loop_s
    ctx = replace(ctx, loop_s=0.1)
    assert ctx.timed_loop_s == pytest.approx(10 * period.period_s)  # 10 periods > loop_s


def test_a_model_item_measures_each_phase_on_the_cpu() -> None:
    pytest.importorskip("torch")
    qwen = load_model_catalog().get("Qwen/Qwen3-30B-A3B").require_architecture()
    tiny = replace(
        qwen,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        moe_intermediate_size=16,
        num_experts=4,
        experts_per_token=2,
        num_layers=2,
        num_moe_layers=2,
        vocab_size=100,
    )
    h100 = load_gpu_catalog().get("H100-SXM5-80GB").spec
    case = ModelCase("moe", "Qwen/Qwen3-30B-A3B", layers_delta=-46)
    rule = replace(CAMPAIGN_RULE, tolerance=1.0)
    period = MeterPeriod(guess_s=0.01)  # readings of 10 periods: 0.1 s each
    measured = model_item(
        case,
        tiny,
        2,
        8,
        3,
        device="cpu",
        meter=ConstantPowerMeter(),
        gpu=h100,
        period=period,
        rule=rule,
    )
    rows = measured.run()["end_to_end"]
    assert [r["phase"] for r in rows] == ["prefill", "decode", "request"]
    for row in rows:
        # Two readings back to back, each of at least 0.1 s: one span of at least 0.2 s,
        # and the energy and time per run are its totals over its runs.
        assert row["span_s"] >= 0.2 and row["repeats"] == 2
        assert row["runs"] * row["time_s"] == pytest.approx(row["span_s"])
        assert row["gpu_j"] == pytest.approx(WATTS * row["time_s"], rel=0.02)
        assert (row["num_layers"], row["batch_size"], row["engine"]) == (2, 2, "hf-transformers")


def test_files_and_provenance_round_trip(tmp_path: Path) -> None:
    clock = Clock()
    run = run_within_budget([item(clock, "a", 1, 1)], 10.0, clock=clock, progress=False)
    run.rows = {"gemm_perf": [{"m": 4, "n": 32, "k": 16, "gemm_dtype": "fp8", "power": 512.5}]}
    facts = {"driver": "570.86.15", "power_limit_w": [700.0], "uuids": ["GPU-1"]}
    document = provenance(
        gpu="H100-SXM5-80GB",
        gpu_name="NVIDIA H100 80GB HBM3",
        facts=facts,
        torch_version="2.13.0+cu128",
        cuda_version="12.8",
        budget_s=450.0,
        elapsed_s=431.04,
        power_source="nvml-field-power-instant",
        argv=["--out", "data/campaigns/x"],
        meter_update_period_s=0.1,
    )
    root = tmp_path / "campaigns"
    write_campaign(root / "2026-11-26-h100", run, document)
    (campaign,) = committed_campaigns(root)
    p = campaign.provenance
    assert (p["gpu"], p["driver"], p["torch"], p["engine"]) == (
        "H100-SXM5-80GB",
        "570.86.15",
        "2.13.0+cu128",
        "hf-transformers",
    )
    assert p["command"] == "python -m offline.measure.campaign --out data/campaigns/x"
    assert p["items"] == {"done": 1, "skipped": 0, "failed": 0} and p["elapsed_s"] == 431.0
    assert p["meter_update_period_s"] == 0.1
    assert campaign.tables["gemm_perf"] == {
        "m": [4],
        "n": [32],
        "k": [16],
        "gemm_dtype": ["fp8"],
        "power": [512.5],
    }
    assert committed_campaigns(tmp_path / "none") == []
    broken = root / "2026-11-27-h200"
    broken.mkdir()
    (broken / "provenance.json").write_text(json.dumps({"format": p["format"], "gpu": "H200"}))
    with pytest.raises(InvalidCampaign, match="provenance lacks"):
        read_campaign(broken)


def test_refuses_without_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    assert main(["--out", str(tmp_path / "c"), "--no-progress"]) == 2
    assert "no NVIDIA GPU/NVML" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
