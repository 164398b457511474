"""The campaign's kernels: GEMMs over M at bf16 and fp8, attention prefill and decode over the
context, and a MoE grouped GEMM over the token count, each timed in a loop with its power.

Shapes are Llama-3.1-8B's at one GPU (hidden 4096, 32 query and 8 KV heads of 128, FFN 14336;
its published config.json, as the model catalogue holds it) and, for the MoE, Qwen3-30B-A3B's
expert layer (hidden 2048, 128 experts of FFN 768, 8 per token). Rows are written in the
column layout of aiconfigurator's kernel tables (``gemm_perf``: m, n, k, gemm_dtype;
``context_attention_perf`` / ``generation_attention_perf``: batch_size, isl, step, heads,
dtypes; ``moe_perf``: num_tokens, hidden_size, inter_size, topk, num_experts, ...; ``latency``
in ms, ``power`` in W), so offline.validation.kernel_ops prices them as it prices those tables.
On a GPU each loop replays a CUDA graph of `calls_per_graph` calls, so launch gaps do not
count as kernel time (aiconfigurator's collectors do the same); torch is imported when an item
runs. A loop lasts at least `KERNEL_LOOP_PERIODS` meter update periods (the period the traces
so far showed, else the planning guess), so its trace shows that many power updates; each
trace is fed back to the campaign's `MeterPeriod`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from offline.measure.budget import Item, Row, Tables
from offline.measure.kernel_loop import LoopMeasurement, PowerMeter, measure_loop
from offline.measure.power_trace import MeterPeriod

# (n, k) of Llama-3.1-8B's projections at one GPU: (32 + 2 x 8) x 128 = 6144 QKV outputs,
# gate and up 2 x 14336, down 14336 -> 4096.
GEMM_SHAPES = {"qkv_proj": (6144, 4096), "gate_up_proj": (28672, 4096), "down_proj": (4096, 14336)}
SHAPES_MODEL = {
    "gemm_perf": "meta-llama/Llama-3.1-8B-Instruct",
    "context_attention_perf": "meta-llama/Llama-3.1-8B-Instruct",
    "generation_attention_perf": "meta-llama/Llama-3.1-8B-Instruct",
    "moe_perf": "Qwen/Qwen3-30B-A3B",
}
"""The catalogue model whose shapes each kernel table sweeps (its family holds the rows out)."""
KERNEL_LOOP_PERIODS = 10.0
"""Meter update periods a kernel loop lasts at least."""


@dataclass(frozen=True, slots=True)
class KernelGrid:
    """What the campaign sweeps (defaults: the 8-minute campaign)."""

    gemm_m_bf16: tuple[int, ...] = (1, 8, 32, 128, 512, 2048, 8192)
    gemm_m_fp8: tuple[int, ...] = (16, 32, 128, 512, 2048, 8192)  # _scaled_mm: multiples of 16
    gemm_shapes: tuple[tuple[int, int], ...] = tuple(GEMM_SHAPES.values())
    heads: tuple[int, int, int] = (32, 8, 128)  # query heads, KV heads, head dim
    context_isl: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384)
    generation: tuple[tuple[int, int], ...] = tuple(
        (b, c) for b in (8, 64) for c in (512, 2048, 8192, 32768)
    )  # (batch, cached tokens)
    moe: tuple[int, int, int, int] = (2048, 768, 128, 8)  # hidden, expert FFN, experts, top-k
    moe_tokens: tuple[int, ...] = (16, 128, 1024, 4096, 16384)


@dataclass(frozen=True, slots=True)
class KernelContext:
    """Where and how kernels are timed."""

    device: str
    meter: PowerMeter
    synchronize: Callable[[], None]
    period: MeterPeriod
    loop_s: float = 0.8  # shortest loop [s], however fast the meter updates
    warmup_s: float = 0.15
    sample_period_s: float = 0.002
    calls_per_graph: int = 10

    @property
    def timed_loop_s(self) -> float:
        """How long a loop runs now [s]: `loop_s`, or `KERNEL_LOOP_PERIODS` meter periods."""
        return max(self.loop_s, KERNEL_LOOP_PERIODS * self.period.period_s)

    @property
    def planned_s(self) -> float:
        """Planned time of one kernel item [s]: warm-up, loop, and ~0.3 s to build inputs
        and capture the graph."""
        return self.warmup_s + self.timed_loop_s + 0.3


def _timed(ctx: KernelContext, call: Callable[[], Any]) -> tuple[LoopMeasurement, str]:
    """The loop measurement of `call`, through a CUDA graph on a GPU (eager elsewhere, or
    where capture fails), and which of the two ran."""
    import torch

    run: Callable[[], None] = call
    per_run, launch = 1, "eager"
    if ctx.device.startswith("cuda"):
        try:
            stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    call()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(ctx.calls_per_graph):
                    call()
            run, per_run, launch = graph.replay, ctx.calls_per_graph, "cuda-graph"
        except RuntimeError:
            torch.cuda.synchronize()
    loop = measure_loop(
        run,
        ctx.meter,
        ctx.synchronize,
        loop_s=ctx.timed_loop_s,
        warmup_s=ctx.warmup_s,
        sample_period_s=ctx.sample_period_s,
        calls_per_run=per_run,
    )
    ctx.period.observe(loop.sample_t_s, loop.samples_w)
    return loop, launch


def _tables(item_id: str, table: str, row: Row, loop: LoopMeasurement, launch: str) -> Tables:
    measured = {
        "item": item_id,
        **row,
        "latency": loop.latency_ms,
        "power": loop.power_w,
        "energy_per_call_j": loop.energy_j / loop.calls,
        "power_sampled_p10": loop.sampled_w(0.1),
        "power_sampled_p50": loop.sampled_w(0.5),
        "power_sampled_p90": loop.sampled_w(0.9),
        "power_samples": len(loop.samples_w),
        "calls": loop.calls,
        "launch": launch,
    }
    trace = [
        {"item": item_id, "t_s": round(t, 6), "power_w": w}
        for t, w in zip(loop.sample_t_s, loop.samples_w, strict=True)
    ]
    return {table: [measured], "power_samples": trace}


def gemm_item(ctx: KernelContext, m: int, n: int, k: int, dtype: str) -> Item:
    item_id = f"gemm {dtype} m={m} n={n} k={k}"

    def run() -> Tables:
        import torch

        a = torch.randn(m, k, device=ctx.device, dtype=torch.bfloat16)
        if dtype == "fp8":
            fp8 = torch.float8_e4m3fn
            a8, b8 = a.to(fp8), torch.randn(n, k, device=ctx.device).to(fp8).t()  # column-major
            one = torch.ones((), device=ctx.device, dtype=torch.float32)

            def call() -> Any:
                return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            b = torch.randn(k, n, device=ctx.device, dtype=torch.bfloat16)

            def call() -> Any:
                return a @ b

        loop, launch = _timed(ctx, call)
        row = {"m": m, "n": n, "k": k, "gemm_dtype": "bfloat16" if dtype == "bf16" else dtype}
        return _tables(item_id, "gemm_perf", row, loop, launch)

    return Item(item_id, "gemm_perf", ctx.planned_s, run)


def attention_item(ctx: KernelContext, grid: KernelGrid, batch: int, new: int, cached: int) -> Item:
    """A causal prefill of `new` tokens (cached 0), or a decode step (new 1) over `cached`."""
    heads, kv_heads, dim = grid.heads
    context = cached == 0
    table = "context_attention_perf" if context else "generation_attention_perf"
    item_id = f"{table.split('_')[0]} attention b={batch} new={new} cached={cached}"

    def run() -> Tables:
        import torch
        import torch.nn.functional as F  # noqa: N812

        def tensor(h: int, t: int) -> Any:
            return torch.randn(batch, h, t, dim, device=ctx.device, dtype=torch.bfloat16)

        q, k, v = tensor(heads, new), tensor(kv_heads, cached + new), tensor(kv_heads, cached + new)

        def call() -> Any:
            return F.scaled_dot_product_attention(q, k, v, is_causal=context, enable_gqa=True)

        loop, launch = _timed(ctx, call)
        row = {
            "batch_size": batch,
            "isl": new,
            "step": cached,
            "num_heads": heads,
            "num_key_value_heads": kv_heads,
            "head_dim": dim,
            "window_size": 0,
            "attn_dtype": "bfloat16",
            "kv_cache_dtype": "bfloat16",
        }
        return _tables(item_id, table, row, loop, launch)

    return Item(item_id, table, ctx.planned_s, run)


def moe_item(ctx: KernelContext, grid: KernelGrid, tokens: int) -> Item:
    """One MoE layer's routed experts as a grouped GEMM: gate+up, SiLU gate, down, with the
    tokens spread evenly over the experts (``torch.bmm`` over equal groups)."""
    hidden, inter, experts, topk = grid.moe
    item_id = f"moe bf16 tokens={tokens} experts={experts} top{topk}"

    def run() -> Tables:
        import torch
        import torch.nn.functional as F  # noqa: N812

        per_expert = max(1, tokens * topk // experts)

        def new(*shape: int) -> Any:
            return torch.randn(*shape, device=ctx.device, dtype=torch.bfloat16) * 0.02

        x, up = new(experts, per_expert, hidden), new(experts, hidden, 2 * inter)
        down = new(experts, inter, hidden)

        def call() -> Any:
            gate, value = torch.bmm(x, up).chunk(2, dim=-1)
            return torch.bmm(F.silu(gate) * value, down)

        loop, launch = _timed(ctx, call)
        row = {
            "num_tokens": tokens,
            "hidden_size": hidden,
            "inter_size": inter,
            "topk": topk,
            "num_experts": experts,
            "moe_tp_size": 1,
            "moe_ep_size": 1,
            "moe_dtype": "bfloat16",
            "distribution": "balanced",
            "kernel_source": "torch.bmm gated, equal groups",
        }
        return _tables(item_id, "moe_perf", row, loop, launch)

    return Item(item_id, "moe_perf", ctx.planned_s, run)


def kernel_items(ctx: KernelContext, grid: KernelGrid = KernelGrid()) -> list[Item]:
    """Every kernel item of `grid`, GEMMs first, then attention, then MoE."""
    items = [
        gemm_item(ctx, m, n, k, dtype)
        for dtype, ms in (("bf16", grid.gemm_m_bf16), ("fp8", grid.gemm_m_fp8))
        for n, k in grid.gemm_shapes
        for m in ms
    ]
    items += [attention_item(ctx, grid, 1, isl, 0) for isl in grid.context_isl]
    items += [attention_item(ctx, grid, b, 1, c) for b, c in grid.generation]
    items += [moe_item(ctx, grid, t) for t in grid.moe_tokens]
    return items
