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
from service.core.mla import INDEXER, KV_UP_OPERAND

INDEXER_STEPS: tuple[tuple[str, str, str], ...] = (
    ("dsa_index_k_norm", "norm", "indexer_norm"),
    ("dsa_index_rope", "rope", "indexer_rope"),
    ("dsa_index_quant", "activation", "indexer_quant"),
    ("dsa_indexer", "attention", INDEXER),
    ("dsa_index_topk", "softmax", "indexer_topk"),
)
"""DSA's lightning-indexer kernels in order: (node name, kind the regressor encodes it as,
operand); service.core.dsa counts each."""

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

SLIDING_LAYER_OPERANDS = {"qkv_sliding": "qkv", "rope_sliding": "", "o_sliding": "o"}
"""Operands of the sliding-window layers' own projections and RoPE in a model with a second
attention shape, and the operand each is counted as (at the sliding layers' shapes)."""

RECURRENT_KERNEL_KINDS: tuple[str, ...] = (
    "causal_conv1d",
    "ssd_scan",
    "selective_scan",
    "delta_rule",
    "gated_norm",
    "lightning_attention",
)
"""Kernels of the recurrent mixers (service.core.recurrent). The shipped regressor was trained
before them: it encodes each as the kind of KERNEL_KINDS that does the same sort of work
(`ENCODED_AS`), so its feature hash, and the model, stay valid."""
ENCODED_AS = {
    "causal_conv1d": "activation",
    "ssd_scan": "attention",
    "selective_scan": "attention",
    "delta_rule": "attention",
    "gated_norm": "norm",
    "lightning_attention": "attention",
}


@dataclass(frozen=True, slots=True)
class KernelNode:
    """One kernel of the graph.

    Attributes:
        name: unique name in the graph, e.g. ``qkv_proj`` or ``attention_sliding``.
        kind: one of KERNEL_KINDS or RECURRENT_KERNEL_KINDS.
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
    mixers, mlps = arch.num_mixer_layers, arch.num_mlp_layers
    norm = b.add(KernelNode("input_norm", "norm", mixers))
    mixer_outputs = []
    if arch.num_attention_layers > 0 and arch.sliding_attention is not None:
        mixer_outputs.extend(_add_two_attention_shapes(b, arch, flash_attention, norm))
    elif arch.num_attention_layers > 0:
        mixer_outputs.append(_add_attention_block(b, arch, flash_attention, norm))
    if arch.mamba is not None and arch.num_mamba_layers > 0:
        mixer_outputs.append(_add_recurrent(b, arch, "mamba", norm))
    if arch.delta_net is not None and arch.num_delta_net_layers > 0:
        mixer_outputs.append(_add_recurrent(b, arch, "delta_net", norm))
    attn_out = mixer_outputs[0] if len(mixer_outputs) == 1 else -1
    if tensor_group > 1:
        attn_out = b.add(KernelNode("attn_all_reduce", "all_reduce", mixers), *mixer_outputs)
    if arch.sandwich_norms:
        attn_out = b.add(
            KernelNode("attn_output_norm", "norm", mixers), *_sources(attn_out, mixer_outputs)
        )
    mlp_input = norm if arch.parallel_residual else -1
    if not arch.parallel_residual:
        residual = b.add(
            KernelNode("attn_residual_add", "residual_add", mixers),
            *_sources(attn_out, mixer_outputs),
            layer_input,
        )
        if mlps > 0:
            mlp_input = b.add(KernelNode("post_attn_norm", "norm", mlps), residual)
    if mlps > 0:
        _add_mlp_block(b, arch, tensor_group, expert_group, mlp_input, attn_out)
    return KernelGraph(
        nodes=tuple(b.nodes),
        edges=tuple(b.edges),
        step_nodes=_step_nodes(tensor_group, pipeline_stages),
    )


def _sources(single: int, several: list[int]) -> list[int]:
    """The mixer's output node: the all-reduce or norm after it, else every mixer's output."""
    return [single] if single >= 0 else several


def _add_attention_block(
    b: _GraphBuilder, arch: ModelArchitecture, flash_attention: bool, norm: int
) -> int:
    layers = arch.num_attention_layers
    qkv = b.add(KernelNode("qkv_proj", "gemm", layers, "qkv"), norm)
    if arch.mla is not None:  # q_a_layernorm and kv_a_layernorm: an RMSNorm on each latent
        if arch.mla.q_lora_rank:
            qkv = b.add(KernelNode("q_a_norm", "norm", layers, "mla_q_a"), qkv)
        qkv = b.add(KernelNode("kv_a_norm", "norm", layers, "mla_kv_a"), qkv)
    roped = qkv
    if arch.position == "rope":
        roped = b.add(KernelNode("rope", "rope", layers), qkv)
    if arch.mla is not None:  # kv_b_proj: decompresses in prefill, absorbs in decode
        qkv = b.add(KernelNode("kv_b_proj", "gemm", layers, KV_UP_OPERAND), qkv)
    if arch.dsa is not None:  # DSA's lightning indexer picks the keys attention reads
        step = b.add(KernelNode("dsa_index_k_norm", "norm", layers, "indexer_norm"), qkv)
        for name, kind, operand in INDEXER_STEPS[1:]:
            step = b.add(KernelNode(name, kind, layers, operand), step, roped, qkv)
        qkv = step
    sparse = arch.dsa is not None
    attention_outputs = [
        _add_attention(b, variant, count, flash_attention, roped, qkv, sparse)
        for variant, count in _attention_variants(arch)
    ]
    return b.add(KernelNode("o_proj", "gemm", layers, "o"), *attention_outputs)


def _add_two_attention_shapes(
    b: _GraphBuilder, arch: ModelArchitecture, flash_attention: bool, norm: int
) -> list[int]:
    """The full-attention layers' block and the sliding-window layers' own (a second attention
    shape, `arch.sliding_attention`): projections, RoPE and attention apart, each node counted
    on its layers; the sliding block's operands (SLIDING_LAYER_OPERANDS) make
    kernel_work.kernel_work count them at the sliding layers' shapes."""
    outputs = []
    full = arch.num_attention_layers - arch.num_sliding_window_layers
    for suffix, layers, variant in (
        ("", full, "full"),
        ("_sliding", arch.num_sliding_window_layers, "sliding"),
    ):
        if layers <= 0:
            continue
        qkv = b.add(KernelNode(f"qkv_proj{suffix}", "gemm", layers, f"qkv{suffix}"), norm)
        roped = qkv
        if arch.position == "rope":
            roped = b.add(KernelNode(f"rope{suffix}", "rope", layers, f"rope{suffix}"), qkv)
        attended = _add_attention(b, variant, layers, flash_attention, roped, qkv, False)
        outputs.append(b.add(KernelNode(f"o_proj{suffix}", "gemm", layers, f"o{suffix}"), attended))
    return outputs


def _add_recurrent(b: _GraphBuilder, arch: ModelArchitecture, mixer: str, norm: int) -> int:
    """in_proj, causal conv1d, the scan (Mamba-2's SSD, the delta rule of gated DeltaNet and
    KDA, lightning attention) with its gated RMSNorm, and out_proj of a recurrent mixer
    (`mixer`: ``mamba`` or ``delta_net``). Mamba-1 projects dt, B and C from x (x_proj,
    dt_proj) and gates inside its scan; KDA widens its decay and output-gate bottlenecks
    (gate_proj); lightning attention has no conv1d; LFM2's short conv has no scan."""
    rule = arch.delta_net.rule if mixer == "delta_net" and arch.delta_net else ""
    short = "mamba" if mixer == "mamba" else "linear_attn"
    short = "short_conv" if rule == "short_conv" else short
    layers = arch.num_mamba_layers if mixer == "mamba" else arch.num_delta_net_layers
    proj_in = b.add(KernelNode(f"{short}_in_proj", "gemm", layers, f"{mixer}_in"), norm)
    if rule == "short_conv":  # LFM2: the gated conv alone, its B and C products in conv1d
        conv = b.add(KernelNode("short_conv_conv1d", "causal_conv1d", layers, mixer), proj_in)
        return b.add(KernelNode("short_conv_out_proj", "gemm", layers, f"{mixer}_out"), conv)
    if rule == "lightning":
        scan = b.add(
            KernelNode("linear_attn_lightning", "lightning_attention", layers, mixer), proj_in
        )
        gated = b.add(KernelNode(f"{short}_gated_norm", "gated_norm", layers, mixer), scan, proj_in)
        return b.add(KernelNode(f"{short}_out_proj", "gemm", layers, f"{mixer}_out"), gated)
    conv = b.add(KernelNode(f"{short}_conv1d", "causal_conv1d", layers, mixer), proj_in)
    if mixer == "mamba" and arch.mamba is not None and arch.mamba.selective:
        x_proj = b.add(KernelNode("mamba_x_proj", "gemm", layers, "mamba_x"), conv)
        dt_proj = b.add(KernelNode("mamba_dt_proj", "gemm", layers, "mamba_dt"), x_proj)
        gated = b.add(
            KernelNode("mamba_selective_scan", "selective_scan", layers, mixer),
            conv,
            x_proj,
            dt_proj,
            proj_in,
        )
    else:
        scan_inputs = [conv, proj_in]
        if rule == "kda":
            scan_inputs.append(
                b.add(KernelNode(f"{short}_gate_proj", "gemm", layers, "delta_net_gate"), proj_in)
            )
        scan_kind = "ssd_scan" if mixer == "mamba" else "delta_rule"
        scan = b.add(KernelNode(f"{short}_{scan_kind}", scan_kind, layers, mixer), *scan_inputs)
        gated = b.add(
            KernelNode(f"{short}_gated_norm", "gated_norm", layers, mixer), scan, *scan_inputs[1:]
        )
    return b.add(KernelNode(f"{short}_out_proj", "gemm", layers, f"{mixer}_out"), gated)


def _add_mlp_block(
    b: _GraphBuilder,
    arch: ModelArchitecture,
    tensor_group: int,
    expert_group: int,
    mlp_input: int,
    attn_out: int,
) -> None:
    mlps = arch.num_mlp_layers
    mlp_outputs: list[int] = []
    if arch.num_dense_mlp_layers > 0:
        mlp_outputs.append(
            _add_dense_mlp(b, arch, arch.num_dense_mlp_layers, mlp_input, "", "dense_mlp")
        )
    if arch.is_moe:
        mlp_outputs.extend(_add_moe(b, arch, mlp_input, expert_group))
    mlp_out = mlp_outputs
    if tensor_group > 1:
        mlp_out = [b.add(KernelNode("mlp_all_reduce", "all_reduce", mlps), *mlp_outputs)]
    if arch.sandwich_norms:
        mlp_out = [b.add(KernelNode("mlp_output_norm", "norm", mlps), *mlp_out)]
    residual_inputs = [*mlp_out, attn_out] if arch.parallel_residual else mlp_out
    b.add(KernelNode("mlp_residual_add", "residual_add", mlps), *residual_inputs)


def _attention_variants(arch: ModelArchitecture) -> list[tuple[str, int]]:
    sliding = arch.num_capped_layers  # DSA's top-k attention is priced as a window of k keys
    variants = [("full", arch.num_attention_layers - sliding), ("sliding", sliding)]
    return [(variant, layers) for variant, layers in variants if layers > 0]


def _add_attention(
    b: _GraphBuilder, variant: str, layers: int, flash: bool, roped: int, qkv: int, sparse: bool
) -> int:
    suffix = "" if variant == "full" else ("_sparse" if sparse else "_sliding")
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
    if arch.moe_latent_size:  # routed rows projected into the latent (the router reads hidden)
        rows = b.add(KernelNode("moe_latent_down", "gemm", layers, "latent_down"), source)
    if expert_group > 1:
        ready = (router,) if rows == source else (rows, router)
        rows = b.add(KernelNode("moe_dispatch", "send_recv", layers, "expert_dispatch"), *ready)
    up = b.add(KernelNode("moe_gate_up", "expert_gemm", layers, "expert_up"), rows, router)
    activated = b.add(KernelNode("moe_act", "expert_activation", layers, "moe"), up)
    down = b.add(KernelNode("moe_down", "expert_gemm", layers, "expert_down"), activated, router)
    if expert_group > 1:
        down = b.add(KernelNode("moe_combine", "send_recv", layers, "expert_combine"), down)
    if arch.moe_latent_size:
        down = b.add(KernelNode("moe_latent_up", "gemm", layers, "latent_up"), down)
    outputs = [down]
    if arch.shared_expert_width > 0:
        outputs.append(_add_dense_mlp(b, arch, layers, source, "shared_", "shared_mlp"))
    return outputs


def all_to_all_expert_group(expert: int, data: int) -> int:
    """The `expert_group` of `build_kernel_graph` for `expert`-way expert parallelism under
    `data` attention-data-parallel replicas: engines move routed tokens all-to-all only under
    attention data parallelism. With tensor-parallel attention every GPU holds every token,
    runs its local experts on the rows routed to them, and the MoE output's all-reduce sums
    the ranks, as under tensor parallelism (vLLM: FusedMoEParallelConfig.use_all2all_kernels
    needs dp > 1; TensorRT-LLM: enable_alltoall needs enable_attention_dp)."""
    return expert if data > 1 else 1


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
