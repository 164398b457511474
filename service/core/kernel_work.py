"""Dispatch from a kernel node to the function that counts its work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from service.core import counts, dsa, moe, recurrent
from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape
from service.core.graph import SLIDING_LAYER_OPERANDS, KernelNode
from service.core.mla import INDEXER
from service.core.shards import ShardShapes, sliding_layer_shapes
from service.core.work import Work

KernelCounter = Callable[[KernelNode, ModelArchitecture, ShardShapes, PassShape], Work]

COUNTERS: dict[str, KernelCounter] = {
    "norm": counts.norm_work_of,
    "gemm": counts.weight_gemm_work_of,
    "rope": counts.rope_work_of,
    "attention": counts.attention_work_of,
    "attention_scores": counts.attention_piece(0),
    "softmax": counts.attention_piece(1),
    "attention_context": counts.attention_piece(2),
    "residual_add": counts.residual_add_work_of,
    "activation": counts.activation_work_of,
    "all_reduce": counts.all_reduce_work_of,
    "embedding": counts.embedding_work_of,
    "lm_head": counts.lm_head_work_of,
    "all_gather": counts.all_gather_work_of,
    "sampling": counts.sampling_work_of,
    "send_recv": counts.send_recv_work_of,
    "router": moe.router,
    "expert_gemm": moe.expert_gemm,
    "expert_activation": moe.expert_activation,
    "causal_conv1d": recurrent.causal_conv1d,
    "ssd_scan": recurrent.ssd_scan,
    "selective_scan": recurrent.selective_scan,
    "delta_rule": recurrent.delta_rule,
    "gated_norm": recurrent.gated_norm,
    "lightning_attention": recurrent.lightning_attention,
}


def kernel_work(
    node: KernelNode, arch: ModelArchitecture, shapes: ShardShapes, shape: PassShape
) -> Work:
    """Counts of one execution of `node` on one GPU in a pass of `shape`."""
    if arch.sliding_attention is not None and (
        node.operand == "sliding" or node.operand in SLIDING_LAYER_OPERANDS
    ):  # a sliding-window layer of a second attention shape: counted at its own widths
        arch, shapes = sliding_layer_shapes(arch, shapes)
        node = replace(node, operand=SLIDING_LAYER_OPERANDS.get(node.operand, node.operand))
    if node.operand.startswith(INDEXER):  # DSA's indexer kernels (service.core.dsa)
        return dsa.indexer_work(node, arch, shapes, shape)
    return COUNTERS[node.kind](node, arch, shapes, shape)
