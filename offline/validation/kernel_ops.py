"""Which cost-model kernel each aiconfigurator table's rows are: the registry of priced op types.

`MAPPERS` maps a table's file stem to a function that turns row i into the cost model's kernel
executions (`kernel_pricing.RowCalls`), or into the reason the row is not priced. A table whose
stem is not in `MAPPERS` is listed in the report as not priced: adding an op type is one
function and one entry here (the Mamba-2 and gated-DeltaNet rows: `recurrent_ops`).

Every row, prefill or decode, is priced with the launch cost of a kernel launched on its own
(`kernel_launch_s`, fitted on Vidur's per-kernel timings): the collectors time a kernel or a
module's forward called by itself, not replayed inside a decode step's CUDA graph, which is
what `decode_kernel_launch_s` (about 0) prices, the step's fixed cost carried by
`decode_step_overhead_s`.

Row semantics, from aiconfigurator's collectors (``collector/<engine>/collect_*.py``):
- GEMM: an ``m x k`` activation times a ``k x n`` weight, `gemm_dtype` the quantisation.
- Attention: `batch_size` sequences; context rows compute `isl` new tokens each with no cached
  prefix (causal); generation rows compute one token (`isl` = 1) over `step` cached ones, so
  the context is ``isl + step`` keys. `window_size` > 0 is a sliding window.
- MoE: `num_tokens` tokens through one fused MoE layer (routed experts only: gate+up GEMM,
  activation, down GEMM) sharded `moe_tp_size` x `moe_ep_size`; `inter_size` is one expert's
  full FFN width; `distribution` the routing (the cost model routes uniformly).
- All-reduce: `message_size` elements over `num_gpus` GPUs in one node (custom all-reduce:
  bf16; NCCL: `nccl_dtype`).
- MLA / DSA modules: DeepSeek-V3's (V3.2's) whole attention block with `num_heads` heads,
  `step` cached tokens before a context row's `isl` new ones.
- MLA: DeepSeek-V3's latent attention core with `num_heads` heads on this GPU: context rows
  un-absorbed (QK over 192, V over 128 per head on the decompressed keys), generation rows
  absorbed over the 576-wide latent (service.core.mla). SGLang's context rows are absorbed
  too: its collector (collector/sglang/collect_mla.py) runs the non-absorbed prefill only on
  Blackwell and times FA3 over the 576/512 latent with one KV head elsewhere. These tables
  are the attention core (the projections are in the separate, not yet priced,
  `mla_*_module_perf` tables), so kv_b_proj's GEMM is not added.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from offline.validation.kernel_pricing import KernelCall, PricingContext, RowCalls, shapes_of
from offline.validation.kernel_tables import KernelTable
from offline.validation.recurrent_ops import recurrent
from service.catalog import load_model_catalog
from service.core import counts, moe
from service.core.architecture import DsaShape, ModelArchitecture
from service.core.counts import AttentionSpan, PassShape
from service.core.dtypes import DType, gemm_compute_key
from service.core.graph import KernelNode, build_kernel_graph
from service.core.kernel_work import kernel_work
from service.core.roofline import STREAMING_KINDS
from service.core.terms import capped_sum
from service.core.work import Work
from service.core.workload import Precision

RowResult = RowCalls | str

_B, _F8, _I8, _I4, _MX = DType.BF16, DType.FP8, DType.INT8, DType.INT4, DType.MXFP4
# aiconfigurator dtype name -> (weights, activations) as the cost model takes them.
GEMM_PRECISIONS: dict[str, tuple[DType, DType]] = {
    "bfloat16": (_B, _B),
    "fp8": (_F8, _F8),
    "fp8_block": (_F8, _F8),
    "int8_wo": (_I8, _B),  # weight-only: dequantised in the kernel, bf16 tensor cores
    "int4_wo": (_I4, _B),
    "sq": (_I8, _I8),  # SmoothQuant W8A8
    "w4a16_mxfp4": (_MX, _B),
}
_KV = {"bfloat16": _B, "float16": DType.FP16, "fp8": _F8, "fp8_e4m3": _F8}
_UNIFORM_ROUTING = ("balanced", "uniform")

# A placeholder model for kernels whose shapes come whole from the row (GEMM, all-reduce):
# shard_shapes then only supplies bytes per element.
UNIT_ARCH = ModelArchitecture(1, 1, 1, 1, 1, 1, 1)


def _precision(weights: DType, activations: DType, kv: DType = _B) -> Precision:
    return Precision(weights, activations, kv)


def gemm(table: KernelTable, i: int, ctx: PricingContext) -> RowResult:
    dtype = table.columns["gemm_dtype"][i]
    if dtype not in GEMM_PRECISIONS:
        return f"gemm dtype {dtype}"
    weights, activations = GEMM_PRECISIONS[dtype]
    m, n, k = (float(table.columns[c][i]) for c in ("m", "n", "k"))
    shapes = shapes_of(UNIT_ARCH, ctx.gpu, _precision(weights, activations))
    work = counts.gemm_work(m, k, n, k * n, shapes, ctx.tile_m)
    key = gemm_compute_key(weights, activations)
    return f"gemm {dtype}", [KernelCall(work, key, True)], ctx.launch_s


def _attention(
    arch: ModelArchitecture,
    precision: Precision,
    ctx: PricingContext,
    batch: float,
    span: AttentionSpan,
    tokens: float,
    variant: str,
) -> KernelCall:
    shapes = shapes_of(arch, ctx.gpu, precision)
    shape = PassShape(tokens, batch, batch, {variant: span}, ctx.tile_m)
    node = KernelNode("attention", "attention", 1, "sliding" if variant == "sliding" else "full")
    work = counts.attention_work_of(node, arch, shapes, shape)
    return KernelCall(work, gemm_compute_key(precision.weights, precision.activations), True)


def with_cache_append(call: KernelCall) -> list[KernelCall]:
    """An attention row as the engine runs it: a kernel appending the new keys and values to
    the cache (vLLM's reshape_and_cache_flash / concat_and_cache_mla, TensorRT-LLM's QKV
    preprocessing), reading them and writing them at the cache's precision, then the attention
    kernel; each its own launch."""
    written = call.work.kv_cache_write_bytes
    append = Work(activation_read_bytes=written, kv_cache_write_bytes=written)
    attend = call.work._replace(kv_cache_write_bytes=0.0)
    return [KernelCall(append, call.compute_key, False), KernelCall(attend, call.compute_key, True)]


def attention_span(
    context: bool, new_tokens: float, cached: float, window: int
) -> tuple[AttentionSpan, str]:
    """The cost model's span of one sequence (service.core.terms): a causal prefill of
    `new_tokens` scores N(N+1)/2 pairs (a window w: sum of min(c, w)); a decode step over a
    context of c keys scores and reads c (or min(c, w))."""
    variant = "sliding" if window > 0 else "full"
    if context:
        if window > 0:
            pairs = float(capped_sum(np.array([1.0]), np.array([new_tokens]), window)[0])
        else:
            pairs = new_tokens * (new_tokens + 1.0) / 2.0
        return AttentionSpan(pairs, new_tokens, new_tokens), variant
    keys = cached + new_tokens
    if window > 0:
        keys = min(keys, float(window))
    return AttentionSpan(keys, keys, new_tokens), variant


@lru_cache(maxsize=1024)
def _mha_arch(heads: int, kv_heads: int, head_dim: int, window: int) -> ModelArchitecture:
    return ModelArchitecture(
        heads * head_dim,
        1,
        heads,
        kv_heads,
        head_dim,
        1,
        1,
        sliding_window_tokens=window or None,
        num_sliding_window_layers=1 if window else 0,
    )


def attention(table: KernelTable, i: int, ctx: PricingContext) -> RowResult:
    col = table.columns
    context = table.file.table.startswith("context")
    window = int(table.column("window_size", 0)[i] or 0)
    heads, kv_heads = int(col["num_heads"][i]), int(col["num_key_value_heads"][i])
    arch = _mha_arch(heads, kv_heads, int(col["head_dim"][i]), window)
    act = _F8 if col["attn_dtype"][i] == "fp8" else _B
    precision = _precision(act, act, _KV[col["kv_cache_dtype"][i]])
    batch, isl, step = float(col["batch_size"][i]), float(col["isl"][i]), float(col["step"][i])
    span, variant = attention_span(context, isl, step, window)
    call = _attention(arch, precision, ctx, batch, span, batch * isl, variant)
    label = ("context" if context else "generation") + " attention"
    label += " (sliding window)" if window else ""
    return label, with_cache_append(call), ctx.launch_s


@lru_cache(maxsize=1)
def _deepseek_v3() -> ModelArchitecture:
    """DeepSeek-V3's shapes from the model catalogue (its published config)."""
    return load_model_catalog().get("deepseek-ai/DeepSeek-V3").require_architecture()


def mla(table: KernelTable, i: int, ctx: PricingContext) -> RowResult:
    col = table.columns
    context = "context" in table.file.table
    heads = int(col["num_heads"][i])
    arch = replace(_deepseek_v3(), num_attention_heads=heads, num_key_value_heads=heads)
    precision = _precision(_B, _B, _KV[col["kv_cache_dtype"][i]])
    batch, isl, step = float(col["batch_size"][i]), float(col["isl"][i]), float(col["step"][i])
    span, _ = attention_span(context, isl, step, 0)
    # The cost model's "decode" span is the absorbed attention, "full" the un-absorbed.
    absorbed = not context or table.file.engine == "sglang"
    variant = "decode" if absorbed else "full"
    call = _attention(arch, precision, ctx, batch, span, batch * isl, variant)
    label = "mla " + ("context" if context else "generation")
    return label, with_cache_append(call), ctx.launch_s


# A module row is the whole attention block (collector/vllm/collect_mla_module.py: vLLM's
# DeepseekV2MLAAttention forward, projections + attention + output; TensorRT-LLM's likewise):
# the cost model's kernels of it, the q_a / kv_a RMSNorms and DSA's indexer kernels included.
_MODULE_KERNELS = ("qkv_proj", "q_a_norm", "kv_a_norm", "rope", "kv_b_proj", "attention", "o_proj")
_DSA = DsaShape(index_n_heads=64, index_head_dim=128, index_topk=2048)  # DeepSeek-V3.2's


def attention_module(table: KernelTable, i: int, ctx: PricingContext) -> RowResult:
    col = table.columns
    sparse = table.file.table.startswith("dsa")
    model = str(col["model"][i])
    if not model.startswith("deepseek-ai/"):
        return f"{'dsa' if sparse else 'mla'} module of {model}"
    if col["gemm_type"][i] not in GEMM_PRECISIONS:
        return f"module gemm {col['gemm_type'][i]}"
    weights, activations = GEMM_PRECISIONS[col["gemm_type"][i]]
    heads = int(col["num_heads"][i])
    arch = replace(
        _deepseek_v3(),
        num_attention_heads=heads,
        num_key_value_heads=heads,
        dsa=_DSA if sparse else None,
    )
    precision = _precision(weights, activations, _KV[col["kv_cache_dtype"][i]])
    shapes = shapes_of(arch, ctx.gpu, precision)
    batch, isl, step = float(col["batch_size"][i]), float(col["isl"][i]), float(col["step"][i])
    context = "context" in table.file.table and isl > 1  # vLLM runs a 1-token query as decode
    shape = PassShape(batch * isl, batch, batch, _module_spans(context, isl, step), ctx.tile_m)
    graph = build_kernel_graph(arch, flash_attention=True, tensor_group=1, pipeline_stages=1)
    key = gemm_compute_key(weights, activations)
    calls = [
        KernelCall(kernel_work(node, arch, shapes, shape), key, node.kind in STREAMING_KINDS)
        for node in graph.nodes
        if node.name.removesuffix("_sparse") in _MODULE_KERNELS or node.name.startswith("dsa_")
    ]
    label = ("dsa" if sparse else "mla") + " module " + ("context" if context else "generation")
    return label, calls, ctx.launch_s


def _module_spans(context: bool, new: float, cached: float) -> dict[str, AttentionSpan]:
    """Spans of a prefill of `new` tokens over `cached` ones, or of a decode step over
    `cached` + 1 keys (service.core.terms): full attention and the indexer's ("full" or
    "decode"), and DSA's top-k ("sliding", capped at index_topk)."""
    topk = float(_DSA.index_topk)
    if context:
        pairs = cached * new + new * (new + 1.0) / 2.0
        capped = float(
            capped_sum(np.array([cached + 1.0]), np.array([cached + new]), _DSA.index_topk)[0]
        )
        return {
            "full": AttentionSpan(pairs, cached + new, new),
            "sliding": AttentionSpan(capped, new + min(cached, topk), new),
        }
    keys = cached + new
    return {
        "decode": AttentionSpan(keys, keys, new),
        "sliding": AttentionSpan(min(keys, topk), min(keys, topk), new),
    }


def moe_layer(table: KernelTable, i: int, ctx: PricingContext) -> RowResult:
    col = table.columns
    dtype = col["moe_dtype"][i]
    if dtype not in GEMM_PRECISIONS:
        return f"moe dtype {dtype}"
    weights, activations = GEMM_PRECISIONS[dtype]
    tp, ep = int(col["moe_tp_size"][i]), int(col["moe_ep_size"][i])
    gated = "nongated" not in str(col["kernel_source"][i])
    arch = ModelArchitecture(
        int(col["hidden_size"][i]),
        1,
        tp * ep,
        tp * ep,
        1,
        int(col["inter_size"][i]),
        1,
        mlp="gated" if gated else "plain",
        activation="silu" if gated else "relu",
        num_experts=int(col["num_experts"][i]),
        experts_per_token=int(col["topk"][i]),
        num_moe_layers=1,
        fp8_block_scaled=dtype == "fp8_block",
    )
    shapes = shapes_of(arch, ctx.gpu, _precision(weights, activations), tp, ep)
    tokens = float(col["num_tokens"][i])
    shape = PassShape(tokens, tokens, tokens, {}, ctx.tile_m)
    key = gemm_compute_key(weights, activations)
    calls = [
        KernelCall(
            moe.expert_gemm(KernelNode("up", "expert_gemm", 1, "expert_up"), arch, shapes, shape),
            key,
            True,
        ),
        KernelCall(
            moe.expert_activation(
                KernelNode("act", "expert_activation", 1, "moe"), arch, shapes, shape
            ),
            key,
            False,
        ),
        KernelCall(
            moe.expert_gemm(
                KernelNode("down", "expert_gemm", 1, "expert_down"), arch, shapes, shape
            ),
            key,
            True,
        ),
    ]
    label = f"moe {dtype}"
    label += "" if col["distribution"][i] in _UNIFORM_ROUTING else " (power-law routing)"
    return label, calls, ctx.launch_s


def _all_reduce(elements: float, gpus: int, act: DType, ctx: PricingContext) -> KernelCall:
    shapes = shapes_of(UNIT_ARCH, ctx.gpu, _precision(act, act))
    work = counts.all_reduce_work(elements, gpus, shapes)
    return KernelCall(work, gemm_compute_key(act, act), False)


def custom_all_reduce(table: KernelTable, i: int, ctx: PricingContext) -> RowResult:
    col = table.columns
    call = _all_reduce(float(col["message_size"][i]), int(col["num_gpus"][i]), _B, ctx)
    eager = "eager" in str(table.column("backend", "")[i] or "")
    return "all-reduce" + (" (eager)" if eager else ""), [call], ctx.launch_s


def nccl(table: KernelTable, i: int, ctx: PricingContext) -> RowResult:
    col = table.columns
    if col["op_name"][i] != "all_reduce":
        return f"nccl {col['op_name'][i]}"
    act = _I8 if col["nccl_dtype"][i] == "int8" else _B
    call = _all_reduce(float(col["message_size"][i]), int(col["num_gpus"][i]), act, ctx)
    return "all-reduce (NCCL)", [call], ctx.launch_s


MAPPERS = {
    "gemm_perf": gemm,
    "context_attention_perf": attention,
    "generation_attention_perf": attention,
    "context_mla_perf": mla,
    "generation_mla_perf": mla,
    "mla_context_module_perf": attention_module,
    "mla_generation_module_perf": attention_module,
    "dsa_context_module_perf": attention_module,
    "dsa_generation_module_perf": attention_module,
    "moe_perf": moe_layer,
    "custom_allreduce_perf": custom_all_reduce,
    "nccl_perf": nccl,
    "mamba2_perf": recurrent,
    "gdn_perf": recurrent,
    "kda_perf": recurrent,
}
"""Table file stem -> row mapper. Every other table is reported as not priced."""
