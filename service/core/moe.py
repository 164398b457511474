"""Mixture-of-experts kernels: the router and the routed experts' grouped GEMMs.

Routing is taken as uniform: each token picks `experts_per_token` of `num_experts` experts, so a
pass of T tokens touches E (1 - (1 - k/E)^T) distinct experts in expectation. In decode, where T
is small, that is what decides how much expert weight is read; in prefill every expert is
touched. Expert GEMM rows per touched expert are padded to the tile height for compute time.

Expert weights are read at `ShardShapes.expert_stream_bytes` per element (the storage size,
except block-scaled FP8 checkpoints, priced as their kernel runs: see `shards`).

An expert GEMM's counts are linear in three per-pass quantities: the expert rows (token-expert
assignments on this GPU), the same padded per touched expert, and the touched experts
(service.core.terms.expert_terms_many); the cost plan carries its coefficients per unit of each
(`expert_gemm_per_unit`).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape, activation_work, gemm_work
from service.core.graph import KernelNode
from service.core.shards import ShardShapes
from service.core.work import Work

_ROUTER_SOFTMAX_OPS, _ROUTER_SFU = 5.0, 1.0
Number = TypeVar("Number", float, npt.NDArray[np.float64])


def expert_load_imbalance(expert: int, per_doubling: float) -> float:
    """The most loaded of `expert` expert-parallel ranks' routed rows over the mean [-]:
    1 + `per_doubling` x log2(expert), 1 without expert parallelism.

    Real routing is not uniform; the rank holding the popular experts receives more rows, and
    an all-to-all ends with it. `per_doubling` is fitted on aiconfigurator's MoE kernel tables
    (offline/fitting/expert_imbalance.py), which time each MoE layer under balanced routing
    and under its default power-law (alpha 1.01) routing: the ratio of the two at many tokens,
    where time follows the most loaded rank's rows, grows about linearly in log2(EP).
    """
    if expert <= 1:
        return 1.0
    return 1.0 + per_doubling * float(np.log2(expert))


def expected_touched_experts(
    tokens: Number, num_experts: Number | int, experts_per_token: Number | int
) -> Number:
    """Expected number of distinct experts that `tokens` tokens route to (uniform routing); one
    pass, or an array of them (and of the models' expert counts)."""
    miss = 1.0 - experts_per_token / num_experts
    touched: Number = num_experts * (1.0 - miss**tokens)
    return touched


def router(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    """Router GEMM (hidden -> experts, replicated on every GPU) plus softmax and top-k."""
    logits = p.tokens * arch.num_experts
    work = gemm_work(p.tokens, s.hidden, arch.num_experts, s.hidden * arch.num_experts, s, p.tile_m)
    return work.plus(
        Work(cuda_core_ops=_ROUTER_SOFTMAX_OPS * logits, special_function_ops=_ROUTER_SFU * logits)
    )


def _local_routing(arch: ModelArchitecture, s: ShardShapes, tokens: float) -> tuple[float, float]:
    """(expert-token assignments handled by this GPU, distinct local experts it touches)."""
    assignments = tokens * arch.experts_per_token / s.expert
    touched = expected_touched_experts(tokens, arch.num_experts, arch.experts_per_token)
    return assignments, max(touched / s.expert, 1e-12)


def _expert_shape(node: KernelNode, arch: ModelArchitecture, s: ShardShapes) -> tuple[float, float]:
    """(in_features, out_features) of one local expert's GEMM (a latent MoE's experts read and
    write the latent, not the hidden width)."""
    rows = float(arch.expert_input_width)
    if node.operand == "expert_up":
        return rows, s.expert_width * (2 if arch.mlp == "gated" else 1)
    return s.expert_width, rows


def expert_gemm_per_unit(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes
) -> tuple[Work, Work]:
    """Counts of an expert GEMM per expert row (padded FLOPs: per padded row) and per touched
    expert: `expert_gemm` is rows x the first plus touched x the second."""
    in_f, out_f = _expert_shape(node, arch, s)
    per_row = gemm_work(
        1.0, in_f, out_f, in_f * out_f, s, 1, weight_bytes_per_element=s.expert_stream_bytes
    )
    return per_row._replace(weight_bytes=0.0), Work(weight_bytes=per_row.weight_bytes)


def expert_gemm(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    """Grouped GEMM over the touched local experts (gate+up or down projection)."""
    assignments, touched = _local_routing(arch, s, p.tokens)
    in_f, out_f = _expert_shape(node, arch, s)
    per_expert = gemm_work(
        assignments / touched,
        in_f,
        out_f,
        in_f * out_f,
        s,
        p.tile_m,
        weight_bytes_per_element=s.expert_stream_bytes,
    )
    return per_expert.scaled(touched)


def expert_activation(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    """Activation over the routed assignments' expert outputs."""
    assignments, _ = _local_routing(arch, s, p.tokens)
    return activation_work(assignments * s.expert_width, arch, s)
