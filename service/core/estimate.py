"""The analytical estimate: every kernel of both phases, latency, energy and memory.

One implementation serves one request and many: `estimate_contexts` prices N workloads, each of
its own context (model, deployment, engine coefficients), in array operations
(service.core.estimates); `estimate_workloads` is that for one context, and `estimate_request`
for a list of one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError, InvalidParallelism, InvalidWorkload
from service.core.estimates import WorkloadEstimates, price_workloads
from service.core.memory import check_fits
from service.core.pass_plans import PassPlans, PricingContext
from service.core.plan import cost_plan
from service.core.results import RequestEstimate
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
    `check_memory`) the weights and one sequence's KV cache do not fit.
    """
    estimates, errors = estimate_workloads(
        arch, [workload], deployment, coefficients, check_memory=check_memory
    )
    if errors:
        raise errors[0]
    return estimates.item(0)


def estimate_workloads(
    arch: ModelArchitecture,
    workloads: Sequence[Workload],
    deployment: Deployment,
    coefficients: CostModelCoefficients,
    *,
    check_memory: bool = True,
) -> tuple[WorkloadEstimates, dict[int, CostModelError]]:
    """Price many workloads of `arch` on `deployment` at once: the estimates of the valid ones
    (`positions` gives each one's index in `workloads`), and, by index, the error of each
    workload that is invalid or (with `check_memory`) whose one sequence does not fit beside
    the weights. With `check_memory` a batch whose KV cache does not fit at once is priced as
    the engine schedules it (service.core.schedule); without, memory is taken as unlimited.
    Errors of the model or layout, common to every workload, are raised.
    """
    context = pricing_context(arch, deployment, coefficients)
    return estimate_contexts([(context, workloads)], check_memory=check_memory)


@lru_cache(maxsize=4096)
def pricing_context(
    arch: ModelArchitecture, deployment: Deployment, coefficients: CostModelCoefficients
) -> PricingContext:
    """The context `arch` on `deployment` is priced in (cached: a serving process sees few
    combinations, and a pass's per-context arrays are cached by context). Raises the cost
    model's typed errors for an invalid architecture, a layout that does not divide it, or a
    precision the GPU cannot run."""
    _check_pipeline(arch, deployment)
    plan = cost_plan(arch, deployment, coefficients.roofline)
    return PricingContext(plan, deployment, coefficients, _warnings(arch, deployment))


def estimate_contexts(
    groups: Sequence[tuple[PricingContext, Sequence[Workload]]], *, check_memory: bool = True
) -> tuple[WorkloadEstimates, dict[int, CostModelError]]:
    """`estimate_workloads` of workloads of many contexts in one array evaluation: the groups'
    workloads are numbered in order, group after group; the estimates of the valid ones
    (`positions`: their numbers) and, by number, each invalid one's error."""
    errors: dict[int, CostModelError] = {}
    valid: list[int] = []
    rows: list[Workload] = []
    sizes: list[int] = []  # valid rows per group (the pass's rows come group by group)
    number = 0
    for ctx, workloads in groups:
        sizes.append(0)
        for workload in workloads:
            try:
                validate_workload(ctx.plan.arch, workload)
            except CostModelError as error:
                errors[number] = error
            else:
                valid.append(number)
                rows.append(workload)
                sizes[-1] += 1
            number += 1
    plans = PassPlans.of([ctx for ctx, _ in groups], sizes)
    priced = price_workloads(plans, rows, valid, check_memory=check_memory)
    if check_memory:
        # Refused only when one sequence at its longest cannot fit beside the weights; a
        # larger batch is scheduled (service.core.schedule).
        alone = priced.schedule.alone_bytes
        required = plans.rows.weight_bytes + alone
        for j in (required > plans.rows.capacity_bytes).nonzero()[0].tolist():
            ctx = plans.contexts[int(plans.context[j])]
            try:
                check_fits(
                    priced.schedule.alone(
                        j, ctx.plan.weight_bytes_per_gpu, ctx.deployment.gpu.memory_bytes
                    ),
                    ctx.deployment,
                )
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
    """Raise InvalidWorkload for empty batches, sequences beyond the model's context, more
    cached prompt tokens than prompt tokens, or fewer running sequences than the batch."""
    for name in ("batch_size", "prompt_tokens", "output_tokens"):
        value = getattr(workload, name)
        if value < 1:
            raise InvalidWorkload(
                f"{name} must be at least 1, got {value}", field=f"workload.{name}"
            )
    if not 0 <= workload.cached_prompt_tokens <= workload.prompt_tokens:
        raise InvalidWorkload(
            f"cached_prompt_tokens = {workload.cached_prompt_tokens} must be between 0 and "
            f"prompt_tokens = {workload.prompt_tokens}",
            field="workload.cached_prompt_tokens",
        )
    running = workload.concurrent_sequences
    if running is not None and running < workload.batch_size:
        raise InvalidWorkload(
            f"concurrent_sequences = {running} must be at least batch_size = "
            f"{workload.batch_size} (the request's own sequences run among them)",
            field="serving.concurrent_sequences",
        )
    length = workload.prompt_tokens + workload.output_tokens
    if length > arch.max_context_tokens:
        raise InvalidWorkload(
            f"prompt_tokens + output_tokens = {length} exceeds the model's context length of "
            f"{arch.max_context_tokens} tokens; shorten the prompt or the output",
            field="workload.output_tokens",
        )


def _warnings(arch: ModelArchitecture, deployment: Deployment) -> tuple[str, ...]:
    warnings = []
    group = deployment.parallelism.attention_group
    if arch.mla is None and group > arch.num_key_value_heads:
        warnings.append(
            f"{group} GPUs per stage exceed the {arch.num_key_value_heads} KV heads: KV heads "
            "are replicated, so each GPU holds a full KV head"
        )
    return tuple(warnings)
