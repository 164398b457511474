"""Measurement harness plumbing on the CPU: plan parsing, the stability loop with a fake
energy meter, the output format, the refusal without a GPU, and a tiny real torch model."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from offline.measure.__main__ import EXIT_BAD_PLAN, EXIT_NO_GPU, main
from offline.measure.plan import InvalidPlan, PlannedConfiguration, read_plan
from offline.measure.run import run_plan
from offline.measure.stability import StabilityRule, measure_phase
from offline.measure.workload import PhaseRunners, build_runners
from offline.sampling.plan import PLAN_FORMAT
from service.catalog.models import load_model_catalog
from service.schemas.estimate_request import EstimateRequest
from service.schemas.quotes import ObservationIn


class FakeMeter:
    """An energy counter [J] that the fake phases advance."""

    name = "fake GPU"

    def __init__(self) -> None:
        self.total_j = 0.0

    def read_j(self) -> float:
        return self.total_j


def advancing(meter: FakeMeter, energies: list[float]) -> Callable[[], None]:
    """A phase whose successive runs cost `energies` (the last one repeating)."""
    queue: Iterator[float] = iter(energies)
    last = [energies[-1]]

    def run() -> None:
        last[0] = next(queue, last[0])
        meter.total_j += last[0]

    return run


def plan_item(id_: str, count: int = 1, **workload: int) -> dict[str, Any]:
    body = {"batch_size": 2, "prompt_tokens": 16, "output_tokens": 4, **workload}
    return {
        "id": id_,
        "model": "Qwen/Qwen3-8B",
        "layers_delta": 0,
        "request": {
            "model": "Qwen/Qwen3-8B",
            "workload": body,
            "hardware": {"gpu": "H100-SXM5-80GB", "count": count},
        },
    }


def write_plan(path: Path, items: list[dict[str, Any]], fmt: str = PLAN_FORMAT) -> Path:
    path.write_text(json.dumps({"format": fmt, "configurations": items}))
    return path


def test_plan_parsing(tmp_path: Path) -> None:
    configs = read_plan(write_plan(tmp_path / "p.json", [plan_item("a"), plan_item("b", 2)]))
    assert [(c.id, c.gpu_count, c.prompt_tokens) for c in configs] == [
        ("a", 1, 16),
        ("b", 2, 16),
    ]
    EstimateRequest.model_validate(configs[0].request)  # the service can quote it
    bad = [
        write_plan(tmp_path / "f.json", [plan_item("a")], fmt="other"),
        write_plan(tmp_path / "d.json", [plan_item("a"), plan_item("a")]),
        write_plan(tmp_path / "z.json", [plan_item("a", output_tokens=0)]),
        write_plan(tmp_path / "e.json", []),
    ]
    for path in bad:
        with pytest.raises(InvalidPlan):
            read_plan(path)


def test_stability_loop_repeats_until_the_spread_is_small() -> None:
    meter = FakeMeter()
    rule = StabilityRule(min_repeats=3, max_repeats=10, tolerance=0.05, warmup=1)
    # warm-up 50 J (not counted), then 10, 13, 10, 10.2, 10.1: stable over the last three
    phase = measure_phase(advancing(meter, [50, 10, 13, 10, 10.2, 10.1]), meter, rule)
    assert phase.samples_j == pytest.approx((10, 13, 10, 10.2, 10.1))
    assert phase.repeats == 5 and phase.stable
    assert phase.gpu_j == pytest.approx(10.1)
    assert phase.spread == pytest.approx(0.2 / 10.1)


def test_stability_loop_stops_at_the_limit_and_says_unstable() -> None:
    meter = FakeMeter()
    rule = StabilityRule(min_repeats=3, max_repeats=6, tolerance=0.01, warmup=0)
    phase = measure_phase(advancing(meter, [10, 20, 10, 20, 10, 20, 10]), meter, rule)
    assert phase.repeats == 6 and not phase.stable
    assert phase.spread == pytest.approx(0.5)  # last three 20, 10, 20: (20 - 10) / median 20


def test_a_reading_runs_back_to_back_until_it_spans_the_minimum() -> None:
    meter = FakeMeter()
    clock = [0.0]

    def run() -> None:  # 0.3 s and 30 J a run, then 0.25 s and 25 J from the sixth on
        step = 0.3 if meter.total_j < 150.0 else 0.25
        clock[0] += step
        meter.total_j += 100.0 * step

    rule = StabilityRule(min_repeats=2, max_repeats=2, tolerance=0.5, warmup=1, min_span_s=1.0)
    phase = measure_phase(run, meter, rule, clock=lambda: clock[0])
    # Warm-up: run 1 (0.3 s). Reading 1: runs 2-5 (0.3 s each, 1.2 s >= 1 s; 4 runs). Reading 2
    # starts at 150 J: runs of 0.25 s, 4 of them reach 1.0 s. Together 8 runs over 2.2 s
    # and 220 J: 27.5 J and 0.275 s a run. Per-run energies 30 and 25 J: spread 5 / 27.5.
    assert (phase.runs, phase.repeats) == (8, 2)
    assert phase.span_s == pytest.approx(2.2) and phase.time_s == pytest.approx(0.275)
    assert phase.gpu_j == pytest.approx(27.5) and phase.samples_j == pytest.approx((30.0, 25.0))
    assert phase.spread == pytest.approx(5.0 / 27.5) and phase.stable


def fake_runners(meter: FakeMeter) -> PhaseRunners:
    prefill = advancing(meter, [2.0])
    decode = advancing(meter, [8.0])

    def together() -> None:
        prefill()
        decode()

    return PhaseRunners(prefill, decode, together, lambda: None, lambda: None)


class FakePoster:
    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []

    def post(self, record: dict[str, Any]) -> str:
        self.posted.append(record)
        return f"q_{len(self.posted)}"


def test_run_plan_writes_observations_and_skips_what_it_cannot_run(tmp_path: Path) -> None:
    configs = read_plan(write_plan(tmp_path / "p.json", [plan_item("a"), plan_item("b", 4)]))
    meter, out, poster = FakeMeter(), io.StringIO(), FakePoster()
    measured, skipped = run_plan(
        configs,
        lambda _: meter,
        lambda _, __: fake_runners(meter),
        out,
        poster=poster,
        log=lambda _: None,
    )
    assert (measured, skipped) == (1, 1)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert second == {"configuration_id": "b", "skipped": "needs 4 GPUs, 1 here"}
    assert first["quote_id"] == "q_1" and first["device"] == "fake GPU" and first["stable"]
    assert first["devices"] == ["cuda:0"] and first["engine"] == "hf-transformers"
    assert first["phases"]["prefill"]["gpu_j"] == pytest.approx(2.0)
    assert first["phases"]["decode"]["gpu_j"] == pytest.approx(8.0)
    assert first["phases"]["request"]["gpu_j"] == pytest.approx(10.0)
    observation = ObservationIn.model_validate(first["observation"])  # what the service takes
    assert observation.gpu_j == pytest.approx(10.0)
    # The plan's request, as the engine that was measured prices it.
    assert first["request"] == {
        **configs[0].request,
        "serving": {"engine": "hf-transformers", "engine_version": "unknown"},
    }


def test_refuses_without_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = write_plan(tmp_path / "p.json", [plan_item("a")])
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py absent
    assert main(["run", str(plan), "--out", str(tmp_path / "m.jsonl")]) == EXIT_NO_GPU
    assert "no NVIDIA GPU/NVML" in capsys.readouterr().err
    assert not (tmp_path / "m.jsonl").exists()
    assert main(["run", str(tmp_path / "missing.json")]) == EXIT_BAD_PLAN


def test_a_tiny_random_weight_model_runs_every_phase_on_the_cpu() -> None:
    pytest.importorskip("torch")
    models = load_model_catalog()
    tiny = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}
    tiny |= {"head_dim": 16, "intermediate_size": 128, "vocab_size": 500, "num_layers": 2}
    dense = replace(models.get("Qwen/Qwen3-8B").require_architecture(), **tiny)
    moe = replace(
        models.get("Qwen/Qwen3-30B-A3B").require_architecture(),
        **tiny,
        moe_intermediate_size=32,
        num_experts=4,
        experts_per_token=2,
        num_moe_layers=2,
    )
    for arch in (dense, moe):
        runners = build_runners(arch, 2, 12, 3, devices=["cpu"], dtype_name="float32")
        meter = FakeMeter()
        request = {"hardware": {"gpu": "H100-SXM5-80GB"}}
        config = PlannedConfiguration("t", "tiny", 0, 2, 12, 3, "cpu", 1, request)
        out = io.StringIO()
        built = runners
        run = run_plan(
            [config], lambda _, m=meter: m, lambda *_, r=built: r, out, device_kind="cpu", log=print
        )
        assert run == (1, 0)
        assert json.loads(out.getvalue())["phases"]["request"]["repeats"] >= 3
