"""Mixture-of-experts kernels: the router and the routed experts' grouped GEMMs.

Routing is taken as uniform: each token picks `experts_per_token` of `num_experts` experts, so a
pass of T tokens touches E (1 - (1 - k/E)^T) distinct experts in expectation. In decode, where T
is small, that is what decides how much expert weight is read; in prefill every expert is
touched. Expert GEMM rows per touched expert are padded to the tile height for compute time.
"""

from __future__ import annotations

from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape, activation_work, gemm_work
from service.core.graph import KernelNode
from service.core.shards import ShardShapes
from service.core.work import Work

_ROUTER_SOFTMAX_OPS, _ROUTER_SFU = 5.0, 1.0


def expected_touched_experts(tokens: float, num_experts: int, experts_per_token: int) -> float:
    """Expected number of distinct experts that `tokens` tokens route to (uniform routing)."""
    miss = 1.0 - experts_per_token / num_experts
    return float(num_experts * (1.0 - miss**tokens))


def router(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    """Router GEMM (hidden -> experts, replicated on every GPU) plus softmax and top-k."""
    logits = p.tokens * arch.num_experts
    work = gemm_work(p.tokens, s.hidden, arch.num_experts, s.hidden * arch.num_experts, s, p.tile_m)
    return work.plus(
        Work(cuda_core_ops=_ROUTER_SOFTMAX_OPS * logits, special_function_ops=_ROUTER_SFU * logits)
    )


def _local_routing(arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> tuple[float, float]:
    """(expert-token assignments handled by this GPU, distinct local experts it touches)."""
    assignments = p.tokens * arch.experts_per_token / s.expert
    touched = expected_touched_experts(p.tokens, arch.num_experts, arch.experts_per_token)
    return assignments, max(touched / s.expert, 1e-12)


def expert_gemm(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    """Grouped GEMM over the touched local experts (gate+up or down projection)."""
    assignments, touched = _local_routing(arch, s, p)
    gated = arch.mlp == "gated"
    if node.operand == "expert_up":
        in_f, out_f = float(s.hidden), s.expert_width * (2 if gated else 1)
    else:
        in_f, out_f = s.expert_width, float(s.hidden)
    per_expert = gemm_work(assignments / touched, in_f, out_f, in_f * out_f, s, p.tile_m)
    return per_expert.scaled(touched)


def expert_activation(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    """Activation over the routed assignments' expert outputs."""
    assignments, _ = _local_routing(arch, s, p)
    return activation_work(assignments * s.expert_width, arch, s)
