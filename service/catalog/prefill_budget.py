"""The most tokens each serving engine puts in one forward pass of a continuous batch, decode
tokens and prompt chunks together (`Deployment.prefill_budget_tokens`), as its defaults set it.

- vLLM V1 (`vllm-v1`, `vllm`): `max_num_batched_tokens` for the OpenAI server is 8192 on GPUs
  with at least 70 GiB that are not A100s, else 2048 (vllm/engine/arg_utils.py,
  `EngineArgs.get_batch_defaults`; the A100 exception from vLLM PR #17885: a larger budget
  lowered its throughput). V1 always chunks prefill.
- vLLM V0 (`vllm-v0`, 0.5.x): chunked prefill off by default for contexts up to 32K; a step
  prefills waiting prompts whole, up to `max(max_model_len, 2048)` tokens
  (vllm/engine/arg_utils.py, `EngineArgs.create_engine_config` of 0.5.4): priced as a budget of
  the model's context.
- SGLang: `chunked_prefill_size` is 8192 on GPUs of 35 to 160 GiB (H100, H200, A100), 2048
  below, 16384 above (python/sglang/srt/server_args.py, `_handle_gpu_memory_settings`).
- TensorRT-LLM: `max_num_tokens` 8192 (tensorrt_llm BuildConfig and the LLM API's default).
"""

from __future__ import annotations

from service.core.architecture import ModelArchitecture
from service.core.hardware import GpuSpec

_GIB = 2.0**30


def prefill_budget_tokens(engine: str, arch: ModelArchitecture, gpu: GpuSpec) -> int:
    """Tokens per forward pass of `engine` (a profile name) serving `arch` on `gpu`."""
    if engine == "vllm-v0":
        return max(arch.max_context_tokens, 2048)
    if engine == "sglang":
        if gpu.memory_bytes < 35 * _GIB:
            return 2048
        return 8192 if gpu.memory_bytes < 160 * _GIB else 16384
    if engine == "trtllm":
        return 8192
    # vLLM V1, and the default for a profile not listed.
    large = gpu.memory_bytes >= 70 * _GIB and not gpu.id.startswith("A100")
    return 8192 if large else 2048
