"""The analytical estimate of one request: both phases, every kernel, latency, energy, memory."""

from __future__ import annotations

from service.core.architecture import ModelArchitecture, validate_architecture
from service.core.coefficients import CostModelCoefficients
from service.core.counts import AttentionSpan, PassShape
from service.core.dtypes import gemm_compute_key
from service.core.errors import InvalidParallelism, InvalidWorkload
from service.core.graph import KernelNode, build_kernel_graph
from service.core.kernel_table import KernelTable
from service.core.kernel_work import kernel_work
from service.core.memory import check_fits, memory_footprint
from service.core.phase import PhaseContext, WorkPiece, phase_kernel_table
from service.core.results import Phase, PhaseCost, RequestEstimate
from service.core.roofline import unit_rates
from service.core.shards import ShardShapes, shard_shapes
from service.core.work import Work
from service.core.workload import Deployment, Workload

ATTENTION_KINDS = frozenset({"attention", "attention_scores", "softmax", "attention_context"})


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
    validate_architecture(arch)
    validate_workload(arch, workload)
    par = deployment.parallelism
    if par.pipeline > arch.num_layers:
        raise InvalidParallelism(
            f"parallelism.pipeline = {par.pipeline} exceeds the {arch.num_layers} layers",
            field="hardware.parallelism.pipeline",
        )
    shapes = shard_shapes(arch, deployment)
    footprint = memory_footprint(arch, shapes, workload, deployment)
    if check_memory:
        check_fits(footprint, deployment)
    compute_key = gemm_compute_key(deployment.precision.weights, deployment.precision.activations)
    rates = unit_rates(deployment.gpu, compute_key, coefficients.roofline)
    graph = build_kernel_graph(
        arch,
        flash_attention=deployment.flash_attention,
        tensor_group=par.gpus_per_stage,
        pipeline_stages=par.pipeline,
    )
    nodes = graph.nodes + graph.step_nodes
    phases = []
    for phase in (Phase.PREFILL, Phase.DECODE):
        ctx = PhaseContext(
            phase=phase,
            gpu=deployment.gpu,
            rates=rates,
            compute_key=compute_key,
            power=coefficients.power,
            kernel_launch_s=(
                coefficients.roofline.kernel_launch_s
                if phase is Phase.PREFILL
                else coefficients.roofline.decode_kernel_launch_s
            ),
            group_gpus=par.gpus_per_stage,
        )
        pieces = _phase_pieces(
            nodes, arch, shapes, workload, phase, deployment, coefficients.roofline.gemm_tile_m
        )
        table = phase_kernel_table(nodes, pieces, ctx)
        phases.append(_phase_cost(phase, table, workload, deployment, coefficients))
    prefill, decode = phases
    decode_steps = workload.output_tokens - 1
    return RequestEstimate(
        prefill=prefill,
        decode=decode,
        gpu_j=prefill.gpu_j + decode.gpu_j,
        total_s=prefill.time_s + decode.time_s,
        time_per_output_token_s=decode.time_s / decode_steps if decode_steps else 0.0,
        batch_size=workload.batch_size,
        gpu_count=deployment.gpu_count,
        memory=footprint,
        warnings=_warnings(arch, deployment),
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


def _phase_pieces(
    nodes: tuple[KernelNode, ...],
    arch: ModelArchitecture,
    shapes: ShardShapes,
    workload: Workload,
    phase: Phase,
    deployment: Deployment,
    tile_m: int,
) -> list[list[WorkPiece]]:
    """Each node's per-execution work over the phase, as pieces of context range."""
    batch, prompt = workload.batch_size, workload.prompt_tokens
    if phase is Phase.PREFILL:
        spans = _prefill_spans(arch, prompt, deployment.flash_attention)
        shape = PassShape(batch * prompt, batch, batch, spans, tile_m)
        return [[WorkPiece(kernel_work(node, arch, shapes, shape), None, 0, 0)] for node in nodes]
    first, last = prompt + 1, prompt + workload.output_tokens - 1
    if last < first:
        return [[] for _ in nodes]
    step = PassShape(batch, batch, batch, {}, tile_m)
    return [
        _attention_decode_pieces(node, arch, shapes, step, first, last)
        if node.kind in ATTENTION_KINDS
        else [WorkPiece(kernel_work(node, arch, shapes, step), None, first, last)]
        for node in nodes
    ]


def _attention_decode_pieces(
    node: KernelNode,
    arch: ModelArchitecture,
    shapes: ShardShapes,
    step: PassShape,
    first: int,
    last: int,
) -> list[WorkPiece]:
    """Attention work is affine in the keys read; a sliding window caps them at its width."""

    def work_at(keys: int) -> Work:
        span = AttentionSpan(pairs=keys, keys_read=keys, new_tokens=1)
        shape = PassShape(
            step.tokens, step.sequences, step.logit_rows, {node.operand: span}, step.tile_m
        )
        return kernel_work(node, arch, shapes, shape)

    base = work_at(0)
    slope = work_at(1).minus(base)
    window = arch.sliding_window_tokens if node.operand == "sliding" else None
    if window is None or window >= last:
        return [WorkPiece(base, slope, first, last)]
    pieces = []
    if first <= window:
        pieces.append(WorkPiece(base, slope, first, window))
    pieces.append(WorkPiece(work_at(window), None, max(first, window + 1), last))
    return pieces


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


def _phase_cost(
    phase: Phase,
    table: KernelTable,
    workload: Workload,
    deployment: Deployment,
    coefficients: CostModelCoefficients,
) -> PhaseCost:
    steps = 1 if phase is Phase.PREFILL else workload.output_tokens - 1
    overhead_s = host_overhead_s(phase, workload, coefficients)
    kernel_s = sum(table.time_s)
    gpu = deployment.gpu
    held = deployment.gpu_count
    waiting = held - deployment.parallelism.gpus_per_stage  # other pipeline stages idle meanwhile
    overhead_w = gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * coefficients.power.host_overhead
    gpu_j = sum(table.gpu_j) + gpu.idle_w * waiting * kernel_s + overhead_w * held * overhead_s
    return PhaseCost(
        phase=phase,
        time_s=kernel_s + overhead_s,
        gpu_j=gpu_j,
        overhead_s=overhead_s,
        steps=steps,
        table=table,
    )


def host_overhead_s(phase: Phase, workload: Workload, coefficients: CostModelCoefficients) -> float:
    """Host-side time of a phase [s]: one prefill overhead, or per decode step a fixed part
    plus a part per running sequence."""
    roofline = coefficients.roofline
    if phase is Phase.PREFILL:
        return roofline.prefill_overhead_s
    per_step = (
        roofline.decode_step_overhead_s
        + roofline.decode_overhead_per_sequence_s * workload.batch_size
    )
    return (workload.output_tokens - 1) * per_step


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
