"""The contexts one pricing pass evaluates together, as per-row arrays.

A pass prices N workloads, each of its own context (model, deployment, engine coefficients):
one array evaluation for all of them costs about what it costs for one, whether they share a
context or not. Each context's constants (GPU power, engine overheads, memory, layout, window,
experts, KV-cache sizes) become a column of `ContextRows` ([N] arrays); each plan's per-kernel
arrays are padded with zero kernels to one width (`PassPlans.width`, a multiple of 8 with at
least one spare column, so sums over kernels add whole blocks of zeros and come out as for the
plan alone). The spare column holds nothing: attention kernels a plan lacks point at it, with
no layers, so their work vanishes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache
from itertools import accumulate, pairwise

import numpy as np
import numpy.typing as npt

from service.core.coefficients import CostModelCoefficients
from service.core.plan import CostPlan
from service.core.recurrent import recurrent_state_bytes
from service.core.shards import sliding_kv_width_ratio
from service.core.workload import Deployment

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]
SMALL_PASS = 16
"""Rows up to which a one-context pass's plans are cached (a single estimate, a small list):
building them is a fixed cost that only such passes notice."""
NO_WINDOW = float(2**52)
"""The window of a context without one: longer than any context, so min(c, window) is c."""


@dataclass(frozen=True, eq=False)
class PricingContext:
    """What one context prices its workloads with."""

    plan: CostPlan
    deployment: Deployment
    coefficients: CostModelCoefficients
    warnings: tuple[str, ...]

    @cached_property
    def values(self) -> tuple[float, ...]:
        """Its constants, in ContextRows' array fields' order."""
        return _context_values(self.plan, self.deployment, self.coefficients)

    @cached_property
    def value_row(self) -> FloatArray:
        """`values` as an array (read-only)."""
        row = np.array(self.values)
        row.setflags(write=False)
        return row

    @cached_property
    def flags(self) -> tuple[bool, bool, bool, bool, bool]:
        """ContextRows' flags for this context alone: fused attention, a window, experts,
        a GEMM tile of more than one row, sliding KV layers."""
        v = dict(zip(_ROW_ARRAYS, self.values, strict=True))
        return (
            v["flash"] > 0,
            v["has_window"] != 0,
            v["moe"] != 0,
            v["tile_m"] > 1,
            v["kv_sliding_layers"] != 0,
        )


@dataclass(slots=True)
class ContextRows:
    """Each row's context constants, [N] arrays (units in the names; flags 0 or 1). Plain,
    not frozen: a frozen `__init__` sets each of its ~45 fields through `object.__setattr__`,
    on every pass of several contexts."""

    idle_w: FloatArray
    tdp_w: FloatArray
    power_compute: FloatArray
    power_memory: FloatArray
    power_network: FloatArray
    power_host_overhead: FloatArray
    power_host_per_sequence: FloatArray
    prefill_launch_s: FloatArray
    decode_launch_s: FloatArray
    prefill_overhead_s: FloatArray
    decode_step_overhead_s: FloatArray
    decode_overhead_per_sequence_s: FloatArray
    decode_overhead_per_worker_s: FloatArray
    tile_m: FloatArray
    held: FloatArray
    gpus_per_stage: FloatArray
    pipeline: FloatArray
    group: FloatArray
    capacity_bytes: FloatArray
    weight_bytes: FloatArray
    window: FloatArray
    has_window: FloatArray
    flash: FloatArray
    experts_per_token: FloatArray
    num_experts: FloatArray
    expert: FloatArray
    moe: FloatArray
    kv_full_layers: FloatArray
    kv_sliding_layers: FloatArray
    kv_window: FloatArray
    kv_width: FloatArray
    kv_bytes: FloatArray
    state_bytes: FloatArray
    prefill_budget_tokens: FloatArray
    data: FloatArray  # attention data-parallel replicas
    ttft_wave_share: FloatArray
    request_overhead_s: FloatArray
    # Derived from the above, once per context rather than once per pass (the same
    # operations, so the same numbers):
    free_bytes: FloatArray  # capacity_bytes - weight_bytes: KV cache room per GPU
    idle_waiting_w: FloatArray  # idle_w x (held - gpus_per_stage): other stages' idle draw
    worker_overhead_s: FloatArray  # decode_overhead_per_worker_s x (held - 1)
    host_overhead_w: FloatArray  # idle_w + (tdp_w - idle_w) x power_host_overhead
    host_sequence_w: FloatArray  # idle_w + (tdp_w - idle_w) x power_host_per_sequence
    dynamic_w: FloatArray  # tdp_w - idle_w: the rise from idle power to TDP
    # Whether every row has fused attention, and any a window or experts: terms no row needs
    # are not computed (the flags of the columns above, read once per pass, not per use).
    all_flash: bool = True
    any_window: bool = False
    any_moe: bool = False
    all_tiled: bool = False  # every row's GEMM tile has more than one row
    any_sliding_kv: bool = False  # any row's KV cache has sliding layers

    @classmethod
    def of(cls, contexts: Sequence[PricingContext], context: IntArray) -> ContextRows:
        """The rows of `contexts`, row j's being contexts[context[j]]."""
        present = [contexts[c] for c in sorted(set(context.tolist()))]
        return cls.gathered(_value_columns(contexts, context), present)

    @classmethod
    def gathered(cls, columns: FloatArray, contexts: Sequence[PricingContext]) -> ContextRows:
        """The rows of `columns` [len(values), N] (each column its row's context's `values`),
        of `contexts` (those the rows are of: the flags are theirs)."""
        flags = [c.flags for c in contexts]
        rows = cls(*columns)
        rows.all_flash = all(f[0] for f in flags)
        rows.any_window = any(f[1] for f in flags)
        rows.any_moe = any(f[2] for f in flags)
        rows.all_tiled = all(f[3] for f in flags)
        rows.any_sliding_kv = any(f[4] for f in flags)
        return rows


_ROW_ARRAYS = tuple(f.name for f in fields(ContextRows) if f.type == "FloatArray")
"""ContextRows' array fields, in order (PricingContext.values holds one number for each)."""


def _value_columns(contexts: Sequence[PricingContext], context: IntArray) -> FloatArray:
    """[len(values), N] row j's context's values in column j (each value's row contiguous:
    a pass reads them one value at a time)."""
    columns: FloatArray = np.take(np.array([c.value_row for c in contexts]).T, context, axis=1)
    return columns


def occupied(members: Sequence[slice]) -> Iterator[tuple[int, slice]]:
    """Each group's number and rows (`members`: a pass's rows, group by group), skipping groups
    without any (slice(None): every row, the one group of a one-context pass)."""
    for g, rows in enumerate(members):
        if rows.start is None or rows.start < rows.stop:
            yield g, rows


# Where PassPlans.launch_s and power_columns are in a context's values.
_LAUNCH = np.array([_ROW_ARRAYS.index(name) for name in ("prefill_launch_s", "decode_launch_s")])
_POWER_COLUMNS = ("group", "idle_w", "dynamic_w", "power_compute", "power_memory", "power_network")
_POWER = np.array([_ROW_ARRAYS.index(name) for name in _POWER_COLUMNS])


def _context_values(
    plan: CostPlan, deployment: Deployment, coefficients: CostModelCoefficients
) -> tuple[float, ...]:
    arch, s, gpu = plan.arch, plan.shapes, deployment.gpu
    roofline, power, par = coefficients.roofline, coefficients.power, deployment.parallelism
    window = arch.capped_window
    recurrent = arch.num_mamba_layers or arch.num_delta_net_layers
    held, dynamic_w = float(deployment.gpu_count), gpu.tdp_w - gpu.idle_w
    return (
        gpu.idle_w,
        gpu.tdp_w,
        power.compute,
        power.memory,
        power.network,
        power.host_overhead,
        power.host_per_sequence,
        roofline.kernel_launch_s,
        roofline.decode_kernel_launch_s,
        roofline.prefill_overhead_s,
        roofline.decode_step_overhead_s,
        roofline.decode_overhead_per_sequence_s,
        roofline.decode_overhead_per_worker_s,
        float(roofline.gemm_tile_m),
        held,
        float(par.gpus_per_stage),
        float(par.pipeline),
        float(s.group),
        gpu.memory_bytes,
        plan.weight_bytes_per_gpu,
        NO_WINDOW if window is None else float(window),
        float(window is not None),
        float(deployment.flash_attention),
        float(arch.experts_per_token if arch.is_moe else 0),
        float(arch.num_experts if arch.is_moe else 1),
        float(s.expert),
        float(arch.is_moe),
        float(arch.num_attention_layers - arch.num_sliding_window_layers),
        float(arch.num_sliding_window_layers) * sliding_kv_width_ratio(arch, s),
        NO_WINDOW if arch.sliding_window_tokens is None else float(arch.sliding_window_tokens),
        s.kv_cache_width,
        s.kv_bytes,
        recurrent_state_bytes(arch, s) if recurrent else 0.0,
        float(deployment.prefill_budget_tokens),
        float(par.data),
        roofline.ttft_wave_share,
        roofline.request_overhead_s,
        gpu.memory_bytes - plan.weight_bytes_per_gpu,
        gpu.idle_w * (held - float(par.gpus_per_stage)),
        roofline.decode_overhead_per_worker_s * (held - 1.0),
        gpu.idle_w + dynamic_w * power.host_overhead,
        gpu.idle_w + dynamic_w * power.host_per_sequence,
        dynamic_w,
    )


@dataclass(frozen=True, slots=True, eq=False)
class PassPlans:
    """The plans of a pass's rows, padded to `width` kernels.

    Attributes:
        contexts: the pass's contexts; `context` [N] each row's index in it.
        members: per context, its rows (a slice: a pass's rows come context by context).
        rows: the rows' context constants.
        width: kernels per row, padding included.
        layers: [N, width] executions of each kernel per forward pass (0 on padding).
        attention: [N, A] each row's context-dependent kernels (padding: the spare column).
        per_key: [N, A, 5 units] their seconds per sequence and context key.
        key_lines: [N, A, 4 limbs x pieces, 5] the slopes (per sequence) of the lines whose
            tops decode sums (service.core.phase): per limb (LIMB_LINES), per piece; a flat
            piece's are 0.
        sliding: [N, A] whether each attends over the sliding window.
        attention_layers: [N, A] their executions per forward pass (0 on padding).
        (With one context, the per-kernel arrays have one row that every row broadcasts.)
        pieces: pieces a decode range is cut into: 2 when any kernel slides, else 1.
        unit_matrices: per context, (2 x BASIS, 6 x width) its terms' seconds per unit (a
            transposed view): the five units' rows, then the network row's collective step
            latency, each padded to `width` kernels (service.core.phase: for a small pass of
            one context, one product gives both phases' unit times).
        line_take: [N, A, 4 limbs x pieces, 5] where each attention kernel's lines (key_lines'
            order) are in the pass's decode unit times ([N, 6 units x width], flattened).
        decode_at: [4 limbs, N, A] where each row's attention kernels' decode limbs (time,
            compute, memory, network) are in service.core.phase's [5, 2, N, width] stacked
            totals, flattened (a flat gather and scatter cost less than fancy indexing).
        launch_s: [2, N, 1] each phase's kernel launch time [s].
        power_columns: [N, 1] views of the rows' group, idle power and its rise to TDP
            (TDP - idle) [W] and compute, memory and network power weights (kernel energy
            broadcasts them over kernels).
    """

    contexts: tuple[PricingContext, ...]
    context: IntArray
    members: tuple[slice, ...]
    rows: ContextRows
    width: int
    layers: FloatArray
    attention: IntArray
    per_key: FloatArray
    key_lines: FloatArray
    sliding: BoolArray
    attention_layers: FloatArray
    pieces: int
    unit_matrices: tuple[FloatArray, ...]
    line_take: IntArray
    decode_at: IntArray
    launch_s: FloatArray
    power_columns: tuple[FloatArray, ...]

    @property
    def count(self) -> int:
        return int(self.context.shape[0])

    def plan_of(self, j: int) -> CostPlan:
        return self.contexts[int(self.context[j])].plan

    def groups(self) -> Iterator[tuple[int, slice]]:
        """Each context's number and rows, skipping contexts without any."""
        return occupied(self.members)

    @classmethod
    def of(cls, contexts: Sequence[PricingContext], sizes: Sequence[int]) -> PassPlans:
        """The plans of a pass whose rows come grouped by context, in order: sizes[c] rows
        (possibly none) of contexts[c]."""
        if len(contexts) == 1 and sizes[0] <= SMALL_PASS:
            return _one_context(contexts[0], sizes[0])
        return cls._build(contexts, sizes)

    @classmethod
    def _build(cls, contexts: Sequence[PricingContext], sizes: Sequence[int]) -> PassPlans:
        n = sum(sizes)
        context = np.array([c for c, size in enumerate(sizes) for _ in range(size)], np.intp)
        kernels = max(len(c.plan.nodes) for c in contexts)
        width = (kernels + 1 + 7) // 8 * 8
        count = max(len(c.plan.attention) for c in contexts) or 1
        padded = [_padded(c.plan, width, count) for c in contexts]
        pieces = 2 if any(p.slides for p in padded) else 1
        if len(contexts) == 1:  # rows broadcast the one context's arrays
            members: tuple[slice, ...] = (slice(None),)
            (one,) = padded
            layers, attention, per_key = one.layers[None], one.attention[None], one.per_key[None]
            sliding, attention_layers = one.sliding[None], one.attention_layers[None]
            key_lines = _key_lines(per_key, pieces)
            line_index = LINE_UNITS[pieces] * width + attention[..., None, None]
        else:  # each row a copy of its context's part (_context_part), gathered in few calls
            bounds = [0, *accumulate(sizes)]
            members = tuple(slice(start, stop) for start, stop in pairwise(bounds))
            parts = [_context_part(c, width, count, pieces) for c in contexts]
            floats = np.array([part[0] for part in parts])[context]
            ints = np.array([part[1] for part in parts])[context]
            at = list(accumulate((width, count * 5, count)))
            layers = floats[:, : at[0]]
            per_key = floats[:, at[0] : at[1]].reshape(n, count, 5)
            attention_layers = floats[:, at[1] : at[2]]
            key_lines = floats[:, at[2] :].reshape(n, count, 4 * pieces, 5)
            attention, sliding = ints[:, :count], ints[:, count : 2 * count] != 0
            line_index = ints[:, 2 * count :].reshape(n, count, 4 * pieces, 5)
        present = [c for c, size in zip(contexts, sizes, strict=True) if size]
        values = _value_columns(contexts, context)
        return cls(
            contexts=tuple(contexts),
            context=context,
            members=members,
            rows=ContextRows.gathered(values, present),
            width=width,
            layers=layers,
            attention=attention,
            per_key=per_key,
            key_lines=key_lines,
            sliding=sliding,
            attention_layers=attention_layers,
            pieces=pieces,
            unit_matrices=tuple(p.unit_matrix for p in padded),
            line_take=_line_take(line_index, n, width),
            decode_at=_decode_at(attention, n, width),
            launch_s=values[_LAUNCH][:, :, None],
            power_columns=tuple(values[_POWER][:, :, None]),
        )


# The lines whose top each limb of an attention kernel sums over decode, of its five units'
# lines: time (all five), compute (the first three, the first repeated to keep five: a repeated
# line does not move the top), memory, network (one line each, repeated).
LIMB_LINES = np.array([[0, 1, 2, 3, 4], [0, 1, 2, 0, 0], [3] * 5, [4] * 5])
# By pieces (1 or 2): which unit each of a kernel's lines is, per limb, per piece.
LINE_UNITS = {pieces: np.repeat(LIMB_LINES, pieces, axis=0) for pieces in (1, 2)}


def _line_take(line_index: IntArray, count: int, width: int) -> IntArray:
    """PassPlans.line_take of `line_index` [1 or N, A, lines, 5] (where each line is in one
    row's flattened (6 units, width) unit times), for `count` rows."""
    result: IntArray = np.arange(count)[:, None, None, None] * (6 * width) + line_index
    return result


def _decode_at(attention: IntArray, count: int, width: int) -> IntArray:
    """PassPlans.decode_at of `attention` [1 or N, A] for `count` rows: the flat index of
    (limb, decode, row, kernel) in a C-ordered [5, 2, count, width] array."""
    limbs = np.arange(4)[:, None, None]
    rows = np.arange(count)[None, :, None]
    result: IntArray = ((limbs * 2 + 1) * count + rows) * width + attention[None]
    return result


def _key_lines(per_key: FloatArray, pieces: int) -> FloatArray:
    """PassPlans.key_lines of `per_key` [R, A, 5]: per limb (LIMB_LINES), per piece, the
    slopes of its lines: the growing piece's are its seconds per key, a flat piece's 0."""
    lines = np.zeros((*per_key.shape[:2], 4 * pieces, 5))
    lines[:, :, ::pieces] = per_key[..., LIMB_LINES]
    return lines


@lru_cache(maxsize=1024)
def _context_part(
    context: PricingContext, width: int, count: int, pieces: int
) -> tuple[FloatArray, IntArray]:
    """What each row of `context` holds in a pass of several contexts (of `width` kernels,
    `count` attention kernels and `pieces` per decode range), flat: its padded layers,
    attention kernels' seconds per key, their layers and key lines (floats);
    its attention kernels' indices, sliding flags (0 or 1) and line units (ints). Cached, so
    a pass gathers them rather than building each array anew."""
    p = _padded(context.plan, width, count)
    floats = np.concatenate(
        [
            p.layers,
            p.per_key.reshape(-1),
            p.attention_layers,
            _key_lines(p.per_key[None], pieces).reshape(-1),
        ]
    )
    line_index = LINE_UNITS[pieces] * width + p.attention[:, None, None]
    ints = np.concatenate([p.attention, p.sliding, line_index.reshape(-1)], dtype=np.intp)
    floats.setflags(write=False)
    ints.setflags(write=False)
    return floats, ints


@lru_cache(maxsize=1024)
def _one_context(context: PricingContext, count: int) -> PassPlans:
    """The plans of a pass of `count` rows of one context: they depend on nothing else, so a
    serving process, which prices the same few contexts over and over, builds each once (its
    arrays read-only: every pass of that size shares them)."""
    plans = PassPlans._build([context], [count])
    per_kernel = (plans.layers, plans.attention, plans.per_key, plans.key_lines, plans.sliding)
    rows = (getattr(plans.rows, column.name) for column in fields(ContextRows))
    rows = (column for column in rows if isinstance(column, np.ndarray))
    derived = (plans.line_take, plans.decode_at, plans.launch_s, *plans.power_columns)
    for array in (plans.context, *per_kernel, plans.attention_layers, *rows, *derived):
        array.setflags(write=False)
    return plans


@dataclass(frozen=True, slots=True)
class _PaddedPlan:
    """A plan's per-kernel layers padded to a pass's width, and its attention kernels
    (indices, seconds per key, sliding, layers) padded to its count with the spare column."""

    layers: FloatArray
    attention: IntArray
    per_key: FloatArray
    sliding: BoolArray
    attention_layers: FloatArray
    unit_matrix: FloatArray  # PassPlans.unit_matrices' of this plan
    slides: bool  # whether any attention kernel attends over the sliding window


@lru_cache(maxsize=1024)
def _padded(plan: CostPlan, width: int, count: int) -> _PaddedPlan:
    kernels, terms = len(plan.nodes), plan.unit_major_seconds.shape[1]
    units = np.zeros((6, width, terms))
    units[:5, :kernels] = plan.unit_major_seconds.reshape(5, kernels, terms)
    units[5, :kernels] = plan.latency_seconds
    # Kept (6 x width, terms) and read transposed, as the plan's own matrices are: a product
    # with the transposed view runs faster under a threaded BLAS than with its copy.
    unit_matrix = units.reshape(6 * width, terms).T
    unit_matrix.setflags(write=False)
    layers = np.zeros(width)
    layers[: len(plan.nodes)] = plan.layers
    index, keys, slides = _attention_lines(plan)
    a = len(index)
    attention = np.full(count, width - 1, dtype=np.intp)
    per_key = np.zeros((count, 5))
    sliding = np.zeros(count, dtype=np.bool_)
    attention_layers = np.zeros(count)
    attention[:a], per_key[:a], sliding[:a] = index, keys, slides
    attention_layers[:a] = plan.layers[index]
    any_slides = bool(sliding.any())
    return _PaddedPlan(
        layers, attention, per_key, sliding, attention_layers, unit_matrix, any_slides
    )


@lru_cache(maxsize=1024)
def _attention_lines(plan: CostPlan) -> tuple[IntArray, FloatArray, BoolArray]:
    """The plan's attention kernels: their indices, each unit's seconds per sequence and
    context key [A, units], whether each attends over the sliding window [A]."""
    index = np.array(plan.attention, dtype=np.intp)
    per_key = np.array([plan.seconds_per_context_key[i] for i in plan.attention]).reshape(-1, 5)
    sliding = np.array([plan.nodes[i].operand == "sliding" for i in plan.attention], dtype=bool)
    return index, per_key, sliding
