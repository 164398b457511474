"""The analytical estimate of a request: both phases, every kernel, latency, energy, memory.

`estimate_request` prices one request (service.core.phase: ~20 kernels, plain floats where numpy
would cost more than it saves); `estimate_requests` prices many workloads of one model on one
deployment in array operations (service.core.estimate_many), with the same results.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.counts import AttentionSpan, padded_rows
from service.core.errors import CostModelError, InvalidParallelism, InvalidWorkload
from service.core.estimate_many import BatchEstimate, price_workloads
from service.core.host_overhead import (
    decode_overhead_s,
    overhead_gpu_j,
    per_sequence_s,
    worker_wait_s,
)
from service.core.memory import check_fits, kv_cache_bytes_per_gpu
from service.core.moe import expert_terms
from service.core.phase import ContextRange, PhaseRequest, phase_kernel_tables
from service.core.plan import cost_plan
from service.core.results import MemoryFootprint, PhaseCost, RequestEstimate
from service.core.shards import ShardShapes
from service.core.workload import Deployment, Workload


def estimate_request(
    arch: ModelArchitecture,
    workload: Workload,
    deployment: Deployment,
    coefficients: CostModelCoefficients,
    *,
    check_memory: bool = True,
) -> RequestEstimate:
    """Price `workload` for `arch` on `deployment` with the roofline and power model.

    Raises a CostModelError subclass naming the input to change when the request is invalid,
    the layout does not divide the model, the GPU cannot run the precision, or (with
    `check_memory`) the weights and KV cache do not fit.
    """
    validate_workload(arch, workload)
    _check_pipeline(arch, deployment)
    plan = cost_plan(arch, deployment, coefficients.roofline)
    par, gpu = deployment.parallelism, deployment.gpu
    footprint = MemoryFootprint(
        plan.weight_bytes_per_gpu,
        kv_cache_bytes_per_gpu(arch, plan.shapes, workload, par.pipeline),
        gpu.memory_bytes,
    )
    if check_memory:
        check_fits(footprint, deployment)
    roofline = coefficients.roofline
    prefill_table, decode_table = phase_kernel_tables(
        plan,
        _phase_requests(
            arch, plan.shapes, workload, deployment.flash_attention, roofline.gemm_tile_m
        ),
        (roofline.kernel_launch_s, roofline.decode_kernel_launch_s),
        coefficients.power,
    )
    steps = workload.output_tokens - 1
    held = deployment.gpu_count
    overhead_s = (
        roofline.prefill_overhead_s,
        decode_overhead_s(roofline, float(workload.batch_size), float(steps), held),
    )
    sequences_s = (0.0, per_sequence_s(roofline, float(workload.batch_size), float(steps)))
    wait_s = (0.0, worker_wait_s(roofline, float(steps), held))
    waiting = held - par.gpus_per_stage  # other pipeline stages idle meanwhile
    prefill, decode = (
        PhaseCost(
            phase=table.phase,
            time_s=table.kernel_time_s + overhead_s[p],
            gpu_j=table.kernel_gpu_j
            + gpu.idle_w * waiting * table.kernel_time_s
            + overhead_gpu_j(
                overhead_s[p], sequences_s[p], wait_s[p], gpu, coefficients.power, held
            ),
            overhead_s=overhead_s[p],
            steps=1 if p == 0 else steps,
            table=table,
        )
        for p, table in enumerate((prefill_table, decode_table))
    )
    return RequestEstimate(
        prefill=prefill,
        decode=decode,
        gpu_j=prefill.gpu_j + decode.gpu_j,
        total_s=prefill.time_s + decode.time_s,
        time_per_output_token_s=decode.time_s / steps if steps else 0.0,
        batch_size=workload.batch_size,
        gpu_count=held,
        memory=footprint,
        warnings=_warnings(arch, deployment),
    )


def estimate_requests(
    arch: ModelArchitecture,
    workloads: Sequence[Workload],
    deployment: Deployment,
    coefficients: CostModelCoefficients,
    *,
    check_memory: bool = True,
) -> tuple[BatchEstimate, dict[int, CostModelError]]:
    """Price many workloads of `arch` on `deployment` at once: what `estimate_request` returns
    for each, as arrays, and the error it raises for each workload that is invalid or (with
    `check_memory`) does not fit, by index. Errors of the model or layout, common to every
    workload, are raised as estimate_request raises them.
    """
    errors: dict[int, CostModelError] = {}
    valid: list[int] = []
    for index, workload in enumerate(workloads):
        try:
            validate_workload(arch, workload)
        except CostModelError as error:
            errors[index] = error
        else:
            valid.append(index)
    _check_pipeline(arch, deployment)
    plan = cost_plan(arch, deployment, coefficients.roofline)
    priced = price_workloads(
        plan,
        [workloads[i] for i in valid],
        valid,
        deployment,
        coefficients,
        _warnings(arch, deployment),
    )
    if check_memory:
        required = plan.weight_bytes_per_gpu + priced.kv_cache_bytes
        for j in np.flatnonzero(required > priced.capacity_bytes_per_gpu).tolist():
            try:
                check_fits(priced.memory(j), deployment)
            except CostModelError as error:
                errors[valid[j]] = error
    return priced, errors


def _check_pipeline(arch: ModelArchitecture, deployment: Deployment) -> None:
    par = deployment.parallelism
    if par.pipeline > arch.num_layers:
        raise InvalidParallelism(
            f"parallelism.pipeline = {par.pipeline} exceeds the {arch.num_layers} layers",
            field="hardware.parallelism.pipeline",
        )


def validate_workload(arch: ModelArchitecture, workload: Workload) -> None:
    """Raise InvalidWorkload for empty batches or sequences beyond the model's context."""
    for name in ("batch_size", "prompt_tokens", "output_tokens"):
        value = getattr(workload, name)
        if value < 1:
            raise InvalidWorkload(
                f"{name} must be at least 1, got {value}", field=f"workload.{name}"
            )
    length = workload.prompt_tokens + workload.output_tokens
    if length > arch.max_context_tokens:
        raise InvalidWorkload(
            f"prompt_tokens + output_tokens = {length} exceeds the model's context length of "
            f"{arch.max_context_tokens} tokens; shorten the prompt or the output",
            field="workload.output_tokens",
        )


def _phase_requests(
    arch: ModelArchitecture, shapes: ShardShapes, workload: Workload, flash: bool, tile_m: int
) -> tuple[PhaseRequest, PhaseRequest]:
    """The BASIS terms of prefill and decode of `workload` (see service.core.plan)."""
    batch, prompt = workload.batch_size, workload.prompt_tokens
    tokens = float(batch * prompt)
    spans = _prefill_spans(arch, prompt, flash)
    full = spans["full"]
    sliding = spans.get("sliding", AttentionSpan(0.0, 0.0, 0.0))
    prefill = [
        1.0,
        tokens,
        float(batch),
        batch * full.pairs,
        batch * full.keys_read,
        batch * full.new_tokens,
        batch * sliding.pairs,
        batch * sliding.keys_read,
        batch * sliding.new_tokens,
    ]
    rows = float(batch)
    decode = [1.0, rows, rows, 0.0, 0.0, rows, 0.0, 0.0, rows]
    requests = []
    for basis, pass_tokens in ((prefill, tokens), (decode, rows)):
        experts = expert_terms(arch, shapes, pass_tokens, tile_m)
        padded = (
            basis[0],
            padded_rows(basis[1], tile_m),
            padded_rows(basis[2], tile_m),
            *basis[3:9],
            experts.padded_rows,
            experts.touched,
        )
        requests.append(((*basis, experts.rows, experts.touched), padded))
    contexts = ContextRange(
        prompt + 1, prompt + workload.output_tokens - 1, arch.sliding_window_tokens
    )
    return (
        PhaseRequest(*requests[0], 1, None, batch),
        PhaseRequest(*requests[1], contexts.steps, contexts, batch),
    )


def _prefill_spans(arch: ModelArchitecture, prompt: int, flash: bool) -> dict[str, AttentionSpan]:
    """Query-key pairs per sequence and head: causal (flash skips masked blocks) or the full
    square that unfused attention computes before masking."""
    full = prompt * (prompt + 1) / 2 if flash else float(prompt * prompt)
    spans = {"full": AttentionSpan(full, prompt, prompt)}
    window = arch.sliding_window_tokens
    if window is not None:
        inside = min(prompt, window)
        sliding = inside * (inside + 1) / 2 + (prompt - inside) * window
        spans["sliding"] = AttentionSpan(
            sliding if flash else float(prompt * prompt), prompt, prompt
        )
    return spans


def _warnings(arch: ModelArchitecture, deployment: Deployment) -> tuple[str, ...]:
    warnings = []
    if arch.mla is not None:
        warnings.append(
            "multi-head latent attention is approximated: weight-absorbed attention over the "
            "latent KV cache, projections as low-rank GEMMs"
        )
    group = deployment.parallelism.gpus_per_stage
    if arch.mla is None and group > arch.num_key_value_heads:
        warnings.append(
            f"{group} GPUs per stage exceed the {arch.num_key_value_heads} KV heads: KV heads "
            "are replicated, so each GPU holds a full KV head"
        )
    return tuple(warnings)
