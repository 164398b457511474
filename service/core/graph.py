"""The kernel graph of a decoder layer (nodes = kernels, edges = data dependencies).

One graph describes every layer of the model: each node carries how many of the model's
layers run it (`layers`), so a model that mixes sliding-window and full attention, or dense and
mixture-of-experts MLPs, has both variants as separate nodes with their own counts. Kernels that
run once per forward pass rather than once per layer (embedding, LM head, sampling, pipeline
hand-offs) are `step_nodes`; they are not part of the layer graph's edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from service.core.architecture import ModelArchitecture

KERNEL_KINDS: tuple[str, ...] = (
    "norm",
    "gemm",
    "rope",
    "attention",
    "attention_scores",
    "softmax",
    "attention_context",
    "residual_add",
    "activation",
    "all_reduce",
    "router",
    "expert_gemm",
    "expert_activation",
    "embedding",
    "lm_head",
    "all_gather",
    "sampling",
    "send_recv",
)
"""Every kind of kernel, in a fixed order (the regressor one-hot encodes it)."""


@dataclass(frozen=True, slots=True)
class KernelNode:
    """One kernel of the graph.

    Attributes:
        name: unique name in the graph, e.g. ``qkv_proj`` or ``attention_sliding``.
        kind: one of KERNEL_KINDS.
        layers: how many times one forward pass runs it (layers that contain it, or 1 / p-1
            for step nodes).
        operand: which weight or tensor it works on (``qkv``, ``o``, ``gate_up``, ``up``,
            ``down``, ``shared_gate_up``, ``shared_down``, ``dense_mlp``/``moe`` for activations,
            ``full``/``sliding`` for attention); empty where the kind says it all.
    """

    name: str
    kind: str
    layers: int
    operand: str = ""


@dataclass(frozen=True, slots=True)
class KernelGraph:
    """Nodes of one decoder layer with their dependency edges, plus per-step nodes."""

    nodes: tuple[KernelNode, ...]
    edges: tuple[tuple[int, int], ...]
    step_nodes: tuple[KernelNode, ...]


class _GraphBuilder:
    def __init__(self) -> None:
        self.nodes: list[KernelNode] = []
        self.edges: list[tuple[int, int]] = []

    def add(self, node: KernelNode, *after: int) -> int:
        index = len(self.nodes)
        self.nodes.append(node)
        self.edges.extend((source, index) for source in after if source >= 0)
        return index


@lru_cache(maxsize=512)
def build_kernel_graph(
    arch: ModelArchitecture,
    *,
    flash_attention: bool,
    tensor_group: int,
    pipeline_stages: int,
    expert_group: int = 1,
) -> KernelGraph:
    """The kernel graph of `arch` when each stage is sharded over `tensor_group` GPUs and its
    routed experts over `expert_group` expert-parallel ranks.

    All-reduces appear only when `tensor_group` > 1, pipeline hand-offs only when
    `pipeline_stages` > 1, and the experts' all-to-all dispatch and combine (kind
    `send_recv`: NCCL runs an all-to-all as grouped sends and receives to every peer) only
    when `expert_group` > 1. With `arch.sandwich_norms` the attention and MLP outputs are
    normalised (after their all-reduce) before the residual adds.
    """
    b = _GraphBuilder()
    layer_input = -1
    norm = b.add(KernelNode("input_norm", "norm", arch.num_layers))
    qkv = b.add(KernelNode("qkv_proj", "gemm", arch.num_layers, "qkv"), norm)
    roped = qkv
    if arch.position == "rope":
        roped = b.add(KernelNode("rope", "rope", arch.num_layers), qkv)
    attention_outputs = [
        _add_attention(b, variant, layers, flash_attention, roped, qkv)
        for variant, layers in _attention_variants(arch)
    ]
    o_proj = b.add(KernelNode("o_proj", "gemm", arch.num_layers, "o"), *attention_outputs)
    attn_out = o_proj
    if tensor_group > 1:
        attn_out = b.add(KernelNode("attn_all_reduce", "all_reduce", arch.num_layers), o_proj)
    if arch.sandwich_norms:
        attn_out = b.add(KernelNode("attn_output_norm", "norm", arch.num_layers), attn_out)
    mlp_input = norm if arch.parallel_residual else -1
    if not arch.parallel_residual:
        residual = b.add(
            KernelNode("attn_residual_add", "residual_add", arch.num_layers), attn_out, layer_input
        )
        mlp_input = b.add(KernelNode("post_attn_norm", "norm", arch.num_layers), residual)
    mlp_outputs: list[int] = []
    dense_layers = arch.num_layers - (arch.num_moe_layers if arch.is_moe else 0)
    if dense_layers > 0:
        mlp_outputs.append(_add_dense_mlp(b, arch, dense_layers, mlp_input, "", "dense_mlp"))
    if arch.is_moe:
        mlp_outputs.extend(_add_moe(b, arch, mlp_input, expert_group))
    mlp_out = mlp_outputs
    if tensor_group > 1:
        mlp_out = [b.add(KernelNode("mlp_all_reduce", "all_reduce", arch.num_layers), *mlp_outputs)]
    if arch.sandwich_norms:
        mlp_out = [b.add(KernelNode("mlp_output_norm", "norm", arch.num_layers), *mlp_out)]
    residual_inputs = [*mlp_out, attn_out] if arch.parallel_residual else mlp_out
    b.add(KernelNode("mlp_residual_add", "residual_add", arch.num_layers), *residual_inputs)
    return KernelGraph(
        nodes=tuple(b.nodes),
        edges=tuple(b.edges),
        step_nodes=_step_nodes(tensor_group, pipeline_stages),
    )


def _attention_variants(arch: ModelArchitecture) -> list[tuple[str, int]]:
    sliding = arch.num_sliding_window_layers
    variants = [("full", arch.num_layers - sliding), ("sliding", sliding)]
    return [(variant, layers) for variant, layers in variants if layers > 0]


def _add_attention(
    b: _GraphBuilder, variant: str, layers: int, flash: bool, roped: int, qkv: int
) -> int:
    suffix = "" if variant == "full" else "_sliding"
    if flash:
        return b.add(KernelNode(f"attention{suffix}", "attention", layers, variant), roped, qkv)
    scores = b.add(
        KernelNode(f"attention_scores{suffix}", "attention_scores", layers, variant), roped
    )
    probs = b.add(KernelNode(f"attention_softmax{suffix}", "softmax", layers, variant), scores)
    return b.add(
        KernelNode(f"attention_context{suffix}", "attention_context", layers, variant), probs, qkv
    )


def _add_dense_mlp(
    b: _GraphBuilder, arch: ModelArchitecture, layers: int, source: int, prefix: str, act: str
) -> int:
    if arch.mlp == "gated":
        up = b.add(KernelNode(f"{prefix}gate_up_proj", "gemm", layers, f"{prefix}gate_up"), source)
    else:
        up = b.add(KernelNode(f"{prefix}up_proj", "gemm", layers, f"{prefix}up"), source)
    activated = b.add(KernelNode(f"{prefix}act", "activation", layers, act), up)
    return b.add(KernelNode(f"{prefix}down_proj", "gemm", layers, f"{prefix}down"), activated)


def _add_moe(
    b: _GraphBuilder, arch: ModelArchitecture, source: int, expert_group: int
) -> list[int]:
    layers = arch.num_moe_layers
    router = b.add(KernelNode("moe_router", "router", layers), source)
    rows = source
    if expert_group > 1:
        rows = b.add(KernelNode("moe_dispatch", "send_recv", layers, "expert_dispatch"), router)
    up = b.add(KernelNode("moe_gate_up", "expert_gemm", layers, "expert_up"), rows, router)
    activated = b.add(KernelNode("moe_act", "expert_activation", layers, "moe"), up)
    down = b.add(KernelNode("moe_down", "expert_gemm", layers, "expert_down"), activated, router)
    if expert_group > 1:
        down = b.add(KernelNode("moe_combine", "send_recv", layers, "expert_combine"), down)
    outputs = [down]
    if arch.shared_expert_width > 0:
        outputs.append(_add_dense_mlp(b, arch, layers, source, "shared_", "shared_mlp"))
    return outputs


def _step_nodes(tensor_group: int, pipeline_stages: int) -> tuple[KernelNode, ...]:
    nodes = [KernelNode("embedding", "embedding", 1)]
    if tensor_group > 1:
        nodes.append(KernelNode("embedding_all_reduce", "all_reduce", 1))
    nodes += [
        KernelNode("final_norm", "norm", 1),
        KernelNode("lm_head", "lm_head", 1),
    ]
    if tensor_group > 1:
        nodes.append(KernelNode("logits_all_gather", "all_gather", 1))
    nodes.append(KernelNode("sampling", "sampling", 1))
    if pipeline_stages > 1:
        nodes.append(KernelNode("pipeline_send", "send_recv", pipeline_stages - 1))
    return tuple(nodes)
