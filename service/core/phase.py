"""Every kernel's time and energy in both phases for many workloads at once, from a CostPlan.

Kernels that do not read the KV cache cost the same at every step of a phase: one matrix product
over all workloads gives their unit times. Decode attention grows with the context c; its unit
times are affine in c and their maximum is summed over the steps exactly from the lines' upper
envelope (service.core.envelope), for all workloads in the same array operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.envelope import sum_max_affine_many
from service.core.pass_plans import LIMB_LINES, SMALL_PASS, PassPlans
from service.core.roofline import drawn_j
from service.core.terms import WorkloadTerms

FloatArray = npt.NDArray[np.float64]


# Not frozen: built on every pass, and a frozen dataclass's __init__ sets each field through
# object.__setattr__ (several times the cost); treated as read-only all the same.
@dataclass(slots=True, eq=False)
class PhaseArrays:
    """[2 phases, N workloads, kernels] totals over each phase: time [s] (wall-clock share),
    its compute, memory and network limbs [s], GPU energy [J] (the request's share of it, in a
    continuous batch), executions; `stacked` [5, 2, N, kernels] holds the first five (views of
    it), so a reader of all five (the feature encoder) copies them in one operation."""

    stacked: FloatArray
    time_s: FloatArray
    compute_s: FloatArray
    memory_s: FloatArray
    network_s: FloatArray
    gpu_j: FloatArray
    executions: FloatArray


def phase_arrays(plans: PassPlans, terms: WorkloadTerms) -> PhaseArrays:
    """Per-kernel totals of both phases of every row of `terms` ([2, N, plans.width]; zero on
    the padding)."""
    both = terms.both  # [2, N, 2 x BASIS]
    n, width = plans.count, plans.width
    # Each context's unit seconds, and its network row's step latency ([2, N, 6 x width],
    # padded kernels 0): a small pass of one context in one matrix product with the padded
    # matrix; a larger one per context with the plan's own (products of the padded width
    # cross into a threaded BLAS, slower on a busy machine).
    if len(plans.unit_matrices) == 1 and n <= SMALL_PASS:
        flat = both @ plans.unit_matrices[0]
    else:
        flat = np.zeros((2, n, 6 * width))
        blocks = flat.reshape(2, n, 6, width)
        for c, members in plans.groups():
            plan = plans.contexts[c].plan
            kernels = len(plan.nodes)
            own = both[:, members]
            blocks[:, members, :5, :kernels] = (own @ plan.unit_major_seconds.T).reshape(
                2, -1, 5, kernels
            )
            blocks[:, members, 5, :kernels] = own @ plan.latency_seconds.T
    unit = flat.reshape(2, n, 6, width)  # [2, N, units + latency, K]
    scale = terms.steps[..., None] * plans.layers * terms.repeats[:, None]  # [2, N, K]
    # The four limbs and the energy in one array (filled in place): time, compute, memory,
    # network [s], GPU energy [J].
    stacked = np.empty((5, *scale.shape))
    limbs = stacked[:4]
    time_s, compute_s, memory_s, network_s, gpu_j = stacked
    # Each unit's [2, N, K] view, all in one unpacking (cheaper than indexing each).
    core_a_s, core_b_s, core_c_s, unit_memory_s, unit_network_s, latency_s = unit.transpose(
        2, 0, 1, 3
    )
    # The slowest compute unit, then the slowest of it, memory and network: pairwise
    # maxima (a reduction over the small units axis costs several of them).
    np.maximum(core_a_s, core_b_s, out=compute_s)
    np.maximum(compute_s, core_c_s, out=compute_s)
    np.maximum(compute_s, unit_memory_s, out=time_s)
    np.maximum(time_s, unit_network_s, out=time_s)
    time_s += plans.launch_s
    memory_s[...] = unit_memory_s
    # Link-busy time only: collective step latency is in time_s, not in the power share.
    np.subtract(unit_network_s, latency_s, out=network_s)
    limbs *= scale
    # Decode's attention kernels grow with the context: their four limbs replaced by the sums
    # over it (put at their flat places in `stacked`).
    decode_s = _decode_attention_s(plans, terms, flat[1])
    stacked.reshape(-1).put(
        plans.decode_at, decode_s * plans.attention_layers * terms.repeats[:, None]
    )
    # Every GPU of the group draws it; the request's share of it (service.core.steady_state).
    group, idle_w, dynamic_w, *weights = plans.power_columns
    np.multiply(
        group,
        drawn_j(
            idle_w,
            dynamic_w,
            (weights[0], weights[1], weights[2]),
            time_s,
            compute_s,
            memory_s,
            network_s,
        ),
        out=gpu_j,
    )
    gpu_j *= terms.share[..., None]
    return PhaseArrays(stacked, time_s, compute_s, memory_s, network_s, gpu_j, scale)


def _decode_attention_s(
    plans: PassPlans, terms: WorkloadTerms, decode_unit: FloatArray
) -> FloatArray:
    """[4, N, A] (time, compute, memory, network) seconds of each row's attention kernels over
    decode, per layer, all in the same few array operations.

    `decode_unit` [N, 6 x kernels]: one decode step's unit times without the context's part,
    flattened (units, kernels) as PassPlans.line_take reads them. A unit's time at context c
    is that plus c times its
    seconds per key; a sliding kernel's context stops growing at the window, so its range is
    cut there into a growing piece and a flat one (for a full-attention kernel the flat piece
    is empty)."""
    pieces = plans.pieces
    # [N, A, 4 limbs, pieces, 5]: per limb (time, compute, memory, network:
    # service.core.pass_plans.LIMB_LINES), per piece, the lines whose top it sums, in one
    # gather of each kernel's unit times and one product of its slopes.
    lines_a = decode_unit.take(plans.line_take)
    lines_b = terms.batch[:, None, None, None] * plans.key_lines
    n, kernels = lines_a.shape[0], lines_a.shape[1]
    first, last = terms.first, terms.last  # [N]
    if pieces == 1:  # no sliding kernel: one growing piece each, over the whole range
        lo, hi = first[:, None, None, None], last[:, None, None, None]  # [N, 1, 1, pieces]
    else:
        a, b = lines_a[:, :, 0], lines_b[:, :, 0]
        cap = np.where(plans.sliding, plans.rows.window[:, None], last[:, None])  # [N, A]
        lines_a[:, :, 1] = a + cap[..., None] * b
        lines_a[:, :, 1::2] = lines_a[:, :, 1][..., LIMB_LINES]  # every limb's flat piece
        lo, hi = np.empty((n, kernels, 1, 2)), np.empty((n, kernels, 1, 2))
        lo[..., 0], hi[..., 1] = first[:, None, None], last[:, None, None]
        lo[..., 1] = np.maximum(first[:, None], cap + 1.0)[..., None]
        hi[..., 0] = np.minimum(last[:, None], cap)[..., None]
    shape = (n, kernels, 4, pieces, 5)  # every limb's ranges: the same (broadcast)
    count = np.maximum(hi - lo + 1.0, 0.0)  # [N, 1 or A, 1, pieces]: steps of each
    tops = sum_max_affine_many(lines_a.reshape(shape), lines_b.reshape(shape), lo, hi, count)
    count = count[:, :, 0]
    # Summed over the pieces by hand (one or two: cheaper than a reduction).
    if pieces == 1:
        summed, steps = tops[..., 0], count[..., 0]
    else:
        summed, steps = tops[..., 0] + tops[..., 1], count[..., 0] + count[..., 1]
    seconds: FloatArray = summed.transpose(2, 0, 1)  # [4, N, A]
    seconds[0] += plans.launch_s[1] * steps
    return seconds
