"""What is asked of the model: the workload, the GPUs and how the model is split over them."""

from __future__ import annotations

from dataclasses import dataclass

from service.core.dtypes import DType
from service.core.hardware import GpuSpec


@dataclass(frozen=True, slots=True)
class Workload:
    """`batch_size` sequences of `prompt_tokens` each generating `output_tokens`.

    The first output token comes out of prefill; decode runs the other output_tokens - 1 steps.
    `cached_prompt_tokens` of each prompt are prefix-cache hits: their KV cache is held, so
    prefill does not recompute them (at least the prompt's last token is computed, as engines
    do to produce the first output token). `concurrent_sequences` None: a static batch running
    alone; given (>= batch_size): the request's sequences run inside a continuous batch of that
    many sequences in steady state (service.core.steady_state). `decode_only`: disaggregated
    serving's decode worker, whose passes carry decode steps only (the prompt is computed on
    a prefill worker and its KV cache handed over, service.core.disaggregated); its running
    sequences are `concurrent_sequences` (None: the request's own).
    """

    batch_size: int
    prompt_tokens: int
    output_tokens: int
    cached_prompt_tokens: int = 0
    concurrent_sequences: int | None = None
    decode_only: bool = False


@dataclass(frozen=True, slots=True)
class Parallelism:
    """Degrees of parallelism; their product is the GPU count.

    A pipeline stage has `tensor * expert` GPUs: routed experts are spread over `expert`
    groups and each expert is sharded over `tensor` GPUs. Attention and the dense layers run
    as `data` attention-data-parallel replicas, each sharded tensor-parallel over
    `attention_group` = stage GPUs / `data` GPUs and serving its 1/data share of the
    sequences (SGLang's and TensorRT-LLM's attention DP, vLLM's DP + EP); with `data` 1 they
    span the whole stage (vLLM's layout when expert parallelism is on without data-parallel
    attention).
    """

    tensor: int = 1
    expert: int = 1
    pipeline: int = 1
    data: int = 1

    @property
    def gpu_count(self) -> int:
        return self.tensor * self.expert * self.pipeline

    @property
    def gpus_per_stage(self) -> int:
        """GPUs that work together on one pipeline stage."""
        return self.tensor * self.expert

    @property
    def attention_group(self) -> int:
        """GPUs one attention-data-parallel replica shards attention over (tensor-parallel)."""
        return self.gpus_per_stage // self.data


@dataclass(frozen=True, slots=True)
class Precision:
    """Storage/compute formats of the weights, the activations and the KV cache."""

    weights: DType = DType.BF16
    activations: DType = DType.BF16
    kv_cache: DType = DType.BF16


@dataclass(frozen=True, slots=True)
class Deployment:
    """The GPUs a request runs on and how the model is laid out over them.

    `unfused_norms`: the engine runs the model's norms as separate PyTorch ops (16-bit to fp32
    cast, square, mean, scale, weight, cast back) instead of one fused kernel, each op a pass
    over the activations in memory (`counts.norm_work_of`). `prefill_budget_tokens`: the most
    tokens the engine puts in one forward pass of a continuous batch, decode tokens and prompt
    chunks together (`engines.prefill_budget_tokens`; service.core.steady_state).
    """

    gpu: GpuSpec
    parallelism: Parallelism
    precision: Precision
    flash_attention: bool = True
    unfused_norms: bool = False
    prefill_budget_tokens: int = 8192

    @property
    def gpu_count(self) -> int:
        return self.parallelism.gpu_count
