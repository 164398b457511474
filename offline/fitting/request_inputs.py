"""How one measured ML.ENERGY row becomes the core's inputs: architecture, workload, deployment
and the serving engine whose host-overhead coefficients it ran under.

The mapping follows ``shared/data/README.md``: a row is one request (batch 1) of the task's mean
prompt (of which the task's prefix-cache hits, `CACHED_PROMPT_TOKENS_BY_TASK`, are cached
tokens) and ``output_tokens`` tokens joining a continuous batch of ``batch_size`` running
sequences (``concurrent_sequences``, the row's round(avg batch)); multimodal rows and
pipeline-parallel rows are left out (the estimate models one text-only replica without pipeline
bubbles); expert-parallel rows list ``tensor_parallel = 1`` although attention spans the whole
expert-parallel group, so the tensor degree is recovered from the GPU count.
"""

from __future__ import annotations

from dataclasses import dataclass

from offline.fitting.datasets import EnergyMeasurement
from service.catalog import GpuCatalog, ModelCatalog
from service.catalog.engines import unfused_norms
from service.catalog.prefill_budget import prefill_budget_tokens
from service.core.architecture import ModelArchitecture
from service.core.cost_model_errors import CostModelError
from service.core.dtypes import DType, parse_dtype
from service.core.workload import Deployment, Parallelism, Precision, Workload

SPLITWISE_HARNESS = "splitwise-harness"
"""The Splitwise measurements' own host-overhead profile: fitted, never served."""

ENGINE_OF_SOURCE: dict[str, str] = {
    "mlenergy-v2": "vllm-v0",
    "mlenergy-v3": "vllm-v1",
    "splitwise": SPLITWISE_HARNESS,
}
"""Host-overhead profile of each source: ML.ENERGY v2 ran vLLM 0.5.4 (V0 engine), v3 ran vLLM
0.11.1 (V1 engine, CUDA graphs). The Splitwise perf model was measured with its own harness: fitted
as a profile of its own, so that its per-kernel launch and step costs do not pull the V1 profile
away from v3 (sharing it overpredicted v3 decode time by a median 17 %)."""

DRIVER_WORKER_ENGINES = frozenset({"vllm-v0", "vllm-v1"})
"""Engines whose driver process hands each step's inputs to one worker process per GPU: their
host time per decode step has a fitted part per worker beyond the first. The Splitwise harness
is not vLLM; nothing says it has such a hand-off, so its per-worker time is held at 0."""

TEXT_CATEGORY = "llm_text_generation"

CACHED_PROMPT_TOKENS_BY_TASK: dict[str, int] = {"lm-arena-chat": 480}
"""Prefix-cache hits per request of a task [tokens] (`Workload.cached_prompt_tokens`): prompt
tokens vLLM 0.11's prefix cache serves instead of recomputing. lm-arena-chat's multi-turn
requests resend their history; the v3 rows' own timings (server time per request beyond its
decode steps, avg_output_len x (1 / output throughput - median ITL / avg batch); not energy)
leave room for about 0.30 of a roofline prefill of its 690 tokens (median of the dense-model
rows; 0.30-0.36 leaving any one family out), so about 210 are computed and 480 are cache hits.
Read as 690 computed tokens, every pass of the continuous batch carries the whole prompt work
of the arrivals, which the server does not do."""


@dataclass(frozen=True, slots=True)
class RequestInputs:
    """The core inputs of one measured row, with the labels validation groups it by."""

    arch: ModelArchitecture
    workload: Workload
    deployment: Deployment
    engine: str
    model_id: str
    family: str


def mlenergy_precision(weights: str) -> Precision:
    """Weights as given; FP8 checkpoints run W8A8, everything else bf16 activations and KV."""
    dtype = parse_dtype(weights, field="weights")
    activations = DType.FP8 if dtype is DType.FP8 else DType.BF16
    return Precision(dtype, activations, DType.BF16)


def mlenergy_parallelism(m: EnergyMeasurement) -> Parallelism:
    """Tensor and expert degrees of the replica (EP rows list TP 1: attention spans the group)."""
    par = Parallelism(tensor=m.tensor_parallel, expert=m.expert_parallel)
    if par.gpu_count != m.gpu_count:
        par = Parallelism(tensor=m.gpu_count // m.expert_parallel, expert=m.expert_parallel)
    return par


def mlenergy_inputs(
    m: EnergyMeasurement, models: ModelCatalog, gpus: GpuCatalog
) -> RequestInputs | str:
    """The core inputs of row `m`, or the reason it cannot be represented (a string)."""
    if m.category != TEXT_CATEGORY or m.pipeline_parallel > 1:
        return f"{m.row_ref}: {m.category}, pipeline {m.pipeline_parallel}"
    engine = ENGINE_OF_SOURCE[m.source]
    try:
        record = models.get(m.model_id)
        arch = record.require_architecture()
        deployment = Deployment(
            gpus.get(m.gpu_id).spec,
            mlenergy_parallelism(m),
            mlenergy_precision(m.weights_precision),
            unfused_norms=unfused_norms(arch, engine),
            prefill_budget_tokens=prefill_budget_tokens(engine, arch, gpus.get(m.gpu_id).spec),
        )
    except (CostModelError, LookupError) as error:
        return f"{m.row_ref}: {error}"
    return RequestInputs(
        arch=arch,
        workload=Workload(
            1,
            m.prompt_tokens,
            m.output_tokens,
            cached_prompt_tokens=_cached_prompt_tokens(m),
            concurrent_sequences=m.batch_size,
        ),
        deployment=deployment,
        engine=engine,
        model_id=record.id,
        family=record.family,
    )


def _cached_prompt_tokens(m: EnergyMeasurement) -> int:
    """Row `m`'s prefix-cache hits [tokens]: its task's, leaving at least the prompt's last token
    computed (a row given a shorter prompt than the task mean)."""
    return min(CACHED_PROMPT_TOKENS_BY_TASK.get(m.task, 0), m.prompt_tokens - 1)
