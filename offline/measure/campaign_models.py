"""The campaign's end-to-end models: random-weight builds of catalogue configs, static batches
over batch size and prompt length, with the GPU energy and time of prefill, decode and the
whole request (offline.measure.workload, stability, as `run` measures a plan).

Four cases, each a catalogue model's published shapes: a dense GQA model (Llama-3.1-8B: 32
query, 8 KV heads), a dense multi-head one of about the same size (Llama-2-7B: 32 and 32), a
small MoE (Qwen3-30B-A3B's layer, 128 experts, 8 per token, cut to 12 of its 48 layers so it
fits one GPU and the time box: `layers_delta` as in a plan) and a sliding-window model (Gemma 3
4B: 29 of 34 layers attend to the last 1,024 tokens).

Each phase is metered over whole meter update periods (offline.measure.stability): two
readings of at least `PHASE_SPAN_PERIODS` periods each, back to back, so the reported energy
is one continuous span of at least twice that divided by the runs in it, and the two readings'
agreement is the recorded spread. The period is the one the campaign's kernel traces showed
(power_trace.MeterPeriod), or the planning guess before any did.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from offline.measure.budget import Item, Row, Tables
from offline.measure.meter import EnergyMeter
from offline.measure.plan import HARNESS_ENGINE
from offline.measure.power_trace import MeterPeriod
from offline.measure.stability import StabilityRule, measure_phase
from offline.measure.workload import build_runners
from service.catalog.models import ModelCatalog
from service.core.architecture import ModelArchitecture
from service.core.hardware import GpuSpec
from service.core.memory import active_parameter_count, parameter_count

BYTES_PER_BF16 = 2.0
# Planning guesses for eager PyTorch (the budget rescales them once items have run): the
# fraction of the dense bf16 peak a prefill reaches, of the memory bandwidth a decode step
# reaches, the host time per decoder layer of an eager forward pass [s] (about fifteen kernel
# launches), per expert a MoE layer runs (a host sync and four launches), and how fast random
# weights are written [B/s].
PLAN_PEAK_FRACTION = 0.4
PLAN_BANDWIDTH_FRACTION = 0.6
PLAN_LAYER_HOST_S = 4e-4
PLAN_EXPERT_HOST_S = 6e-5
PLAN_BUILD_BYTES_PER_S = 20e9


@dataclass(frozen=True, slots=True)
class ModelCase:
    """A catalogue model, what it stands for in the campaign, layers removed, and the
    largest batch it runs (an eager MoE block runs every chosen expert one by one: its
    decode time grows with the experts a batch hits)."""

    case: str
    model: str
    layers_delta: int = 0
    max_batch: int = 1024


CAMPAIGN_MODELS = (
    ModelCase("dense-gqa", "meta-llama/Llama-3.1-8B-Instruct"),
    ModelCase("dense-mha", "meta-llama/Llama-2-7b-hf"),
    ModelCase("moe", "Qwen/Qwen3-30B-A3B", layers_delta=-36, max_batch=4),
    ModelCase("sliding", "google/gemma-3-4b-it"),
)
SHAPES = ((1, 512), (16, 512), (1, 2048), (16, 2048))
"""(batch size, prompt tokens) of each model, cheapest first."""
OUTPUT_TOKENS = 64
CAMPAIGN_RULE = StabilityRule(min_repeats=2, max_repeats=2, tolerance=0.05, warmup=1)
PHASE_SPAN_PERIODS = 10.0
"""Meter update periods each reading of a phase lasts at least (two readings: twice this)."""
PLAN_METER_PERIOD_S = 0.1
"""Planning guess of the meter's update period [s] until the kernel traces show it."""


def phase_rule(rule: StabilityRule, period: MeterPeriod) -> StabilityRule:
    """`rule` with readings of `PHASE_SPAN_PERIODS` meter periods (as known now)."""
    return replace(rule, min_span_s=PHASE_SPAN_PERIODS * period.period_s)


def planned_end_to_end_s(
    arch: ModelArchitecture,
    batch: int,
    prompt: int,
    output: int,
    gpu: GpuSpec,
    rule: StabilityRule = CAMPAIGN_RULE,
) -> float:
    """Planned time of one end-to-end item [s]: building the weights, then three phases
    (prefill, decode, both), each run `warmup` times and then for `min_repeats` readings of
    at least `rule.min_span_s` (at least one run each), every run a roofline guess at the
    planning fractions plus the host time of an eager pass per layer."""
    active = active_parameter_count(arch)
    peak = gpu.gemm_peak_flops_per_s("bf16") * PLAN_PEAK_FRACTION
    bandwidth = gpu.memory_bandwidth_bytes_per_s * PLAN_BANDWIDTH_FRACTION
    host_s = arch.num_layers * PLAN_LAYER_HOST_S

    def experts_s(tokens: int) -> float:  # the experts some token chose, one by one
        hit = min(arch.num_experts, tokens * arch.experts_per_token)
        return arch.num_moe_layers * hit * PLAN_EXPERT_HOST_S

    prefill_s = 2.0 * active * batch * prompt / peak + host_s + experts_s(batch * prompt)
    step_s = active * BYTES_PER_BF16 / bandwidth + host_s + experts_s(batch)
    request_s = prefill_s + output * step_s
    build_s = 1.0 + parameter_count(arch) * BYTES_PER_BF16 / PLAN_BUILD_BYTES_PER_S
    return build_s + sum(
        rule.warmup * run_s + rule.min_repeats * max(rule.min_span_s, run_s)
        for run_s in (prefill_s, output * step_s, request_s)
    )


def model_item(
    case: ModelCase,
    arch: ModelArchitecture,
    batch: int,
    prompt: int,
    output: int,
    *,
    device: str,
    meter: EnergyMeter,
    gpu: GpuSpec,
    period: MeterPeriod,
    rule: StabilityRule = CAMPAIGN_RULE,
) -> Item:
    """One static batch of `case`'s model: a row per phase, its readings as long as
    `period` says when the item runs."""
    item_id = f"{case.case} {case.model} layers={arch.num_layers} b={batch} p={prompt} o={output}"

    def run() -> Tables:
        runners = build_runners(arch, batch, prompt, output, devices=[device])
        now = phase_rule(rule, period)
        try:
            phases = {
                name: measure_phase(phase, meter, now, synchronize=runners.synchronize)
                for name, phase in (
                    ("prefill", runners.prefill),
                    ("decode", runners.decode),
                    ("request", runners.together),
                )
            }
        finally:
            runners.release()
        rows: list[Row] = [
            {
                "item": item_id,
                "case": case.case,
                "model": case.model,
                "num_layers": arch.num_layers,
                "layers_delta": case.layers_delta,
                "batch_size": batch,
                "prompt_tokens": prompt,
                "output_tokens": output,
                "dtype": "bf16",
                "engine": HARNESS_ENGINE,
                "phase": name,
                "gpu_j": energy.gpu_j,
                "time_s": energy.time_s,
                "spread": energy.spread,
                "repeats": energy.repeats,
                "stable": energy.stable,
                "runs": energy.runs,
                "span_s": energy.span_s,
            }
            for name, energy in phases.items()
        ]
        return {"end_to_end": rows}

    planned = planned_end_to_end_s(arch, batch, prompt, output, gpu, phase_rule(rule, period))
    return Item(item_id, "end_to_end", planned, run)


def case_architecture(case: ModelCase, models: ModelCatalog) -> ModelArchitecture:
    """`case`'s catalogue architecture with its layers removed (sliding and MoE layer counts
    kept in proportion)."""
    arch = models.get(case.model).require_architecture()
    if not case.layers_delta:
        return arch
    layers = arch.num_layers + case.layers_delta
    return replace(
        arch,
        num_layers=layers,
        num_moe_layers=min(arch.num_moe_layers, layers),
        num_sliding_window_layers=arch.num_sliding_window_layers * layers // arch.num_layers,
    )


def model_items(
    models: ModelCatalog,
    *,
    device: str,
    meter: EnergyMeter,
    gpu: GpuSpec,
    period: MeterPeriod,
    cases: tuple[ModelCase, ...] = CAMPAIGN_MODELS,
    shapes: tuple[tuple[int, int], ...] = SHAPES,
    output: int = OUTPUT_TOKENS,
    rule: StabilityRule = CAMPAIGN_RULE,
) -> list[Item]:
    """Every (shape, model) item, shape by shape, so that a cut budget loses the largest
    batches and prompts of every model rather than whole models."""
    archs = {case: case_architecture(case, models) for case in cases}
    return [
        model_item(
            case,
            archs[case],
            min(b, case.max_batch),
            p,
            output,
            device=device,
            meter=meter,
            gpu=gpu,
            period=period,
            rule=rule,
        )
        for b, p in shapes
        for case in cases
    ]
