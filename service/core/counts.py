"""Operation and byte counts of each kernel kind for one forward pass on one GPU.

Arithmetic per element follows the usual kernel implementations:
- RMSNorm: square, sum, scale, weight multiply = 4 vector ops per element + 1 rsqrt per row;
  LayerNorm: mean, subtract, square, sum, scale, weight, bias = 7 ops + 1 rsqrt per row.
  Fused, a norm reads and writes the activations once; run as separate PyTorch ops (vLLM <= 0.5.4's
  GemmaRMSNorm.forward_native: x.float(), x.pow(2), .mean(-1), x * rsqrt(var + eps),
  x * (1 + w.float()), .to(dtype)) it reads them once in 16 bits and 5 times in fp32 and writes
  them 4 times in fp32 and once in 16 bits.
- RoPE: x*cos + rotate(x)*sin = 3 ops per element, cos/sin read from a cached table.
- Softmax over attention scores: scale, max, subtract, sum, normalise = 5 ops + 1 exp per score.
- SiLU(x) = x / (1 + exp(-x)): 4 ops + 1 exp; tanh-GELU: 7 ops + 1 tanh; ReLU: 1 op;
  the gated product adds 1 op.
- Ring all-reduce of a tensor of size X over n GPUs: each GPU sends 2(n-1)/n X in 2(n-1)
  steps and adds (n-1)/n of the elements.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from service.core.architecture import ModelArchitecture
from service.core.graph import KernelNode
from service.core.mixers import delta_net_shard, kda_gate_width, mamba_shard
from service.core.mla import (
    KV_UP_OPERAND,
    AttentionDims,
    cached_dims,
    kv_up_shape,
    prefill_dims,
)
from service.core.shards import ShardShapes
from service.core.work import Work

_NORM_OPS = {"rmsnorm": 4.0, "layernorm": 7.0}
_ACTIVATION_OPS = {"silu": (4.0, 1.0), "gelu": (7.0, 1.0), "relu": (1.0, 0.0)}
_SOFTMAX_OPS, _SOFTMAX_SFU = 5.0, 1.0
_SAMPLING_LOGIT_BYTES = 4.0  # logits are upcast to fp32 for sampling
_SPARSE_HEAD_TILE = 64  # query heads per FlashMLA sparse kernel tile
_FP32_BYTES = 4.0
_UNFUSED_NORM_FP32_READS, _UNFUSED_NORM_FP32_WRITES = 5.0, 4.0


@dataclass(frozen=True, slots=True)
class AttentionSpan:
    """How much of the context one sequence's queries attend to in this pass.

    Attributes:
        pairs: query-key pairs scored per sequence and head.
        keys_read: cached tokens read per sequence.
        new_tokens: tokens whose keys/values are written to the cache per sequence.
    """

    pairs: float
    keys_read: float
    new_tokens: float


@dataclass(frozen=True, slots=True)
class PassShape:
    """One forward pass: `tokens` query tokens over `sequences` sequences.

    `logit_rows` is how many positions get logits (one per sequence), `spans` the attention span
    per attention variant: ``full`` (prefilling sequences under full attention), ``decode``
    (decoding sequences under full attention: one query token each, `new_tokens`; apart because
    MLA attends them weight-absorbed, service.core.mla) and ``sliding`` (all sequences, each
    query capped at the window or at DSA's top-k, service.core.dsa); a missing variant attends
    nothing.
    """

    tokens: float
    sequences: float
    logit_rows: float
    spans: dict[str, AttentionSpan]
    tile_m: int


LATENT_OPERANDS = ("latent_down", "latent_up")
"""GEMM operands of a latent MoE's projections into and out of the experts' latent."""


def padded_rows(rows: float, tile_m: int) -> float:
    """`rows` rounded up to a whole number of `tile_m`-row tiles."""
    if tile_m <= 1:
        return rows
    return float(math.ceil(rows / tile_m) * tile_m)


def gemm_work(
    rows: float,
    in_features: float,
    out_features: float,
    weight_elements: float,
    shapes: ShardShapes,
    tile_m: int,
    *,
    weight_bytes_per_element: float | None = None,
) -> Work:
    """A weight GEMM: `rows` x `in_features` activations times a weight of `weight_elements`."""
    weight_bpe = (
        shapes.weight_bytes if weight_bytes_per_element is None else weight_bytes_per_element
    )
    return Work(
        tensor_flops=2.0 * rows * weight_elements,
        padded_tensor_flops=2.0 * padded_rows(rows, tile_m) * weight_elements,
        weight_bytes=weight_elements * weight_bpe,
        activation_read_bytes=rows * in_features * shapes.activation_bytes,
        activation_write_bytes=rows * out_features * shapes.activation_bytes,
    )


def weight_gemm_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    if node.operand == KV_UP_OPERAND and arch.mla is not None:
        in_f, out_f, weights = kv_up_shape(arch.mla, s)
        # two GEMMs (prefill's decompression, decode's absorption), the weight read once
        decode_rows = p.sequences * _span(p, "decode").new_tokens
        # DSA's sparse attention runs absorbed in prefill too: its query tokens, not its keys
        full_keys = p.sequences * _span(p, "full").keys_read
        prefill_rows = p.tokens - decode_rows if arch.dsa is not None else full_keys
        prefill = gemm_work(prefill_rows, in_f, out_f, weights, s, p.tile_m)
        decode = gemm_work(decode_rows, in_f, out_f, weights, s, p.tile_m)
        return prefill.plus(decode._replace(weight_bytes=0.0))
    in_f, out_f, weights = _gemm_shape(node.operand, arch, s)
    work = gemm_work(p.tokens, in_f, out_f, weights, s, p.tile_m)
    if node.operand == "qkv" and arch.qkv_bias:
        work = work.plus(Work(cuda_core_ops=p.tokens * out_f))
    return work


def _gemm_shape(
    operand: str, arch: ModelArchitecture, s: ShardShapes
) -> tuple[float, float, float]:
    """(in_features, out_features, weight elements) of a per-GPU weight matrix."""
    h = s.hidden
    if operand.startswith(("mamba_", "delta_net_")):
        return _recurrent_projection(operand, arch, s)
    if operand == "qkv":
        if arch.mla is not None:
            mla = arch.mla
            q_out = s.heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
            # q_a, kv_a (latent + k_pe) and q_b; kv_b_proj is its own node (service.core.mla)
            # q_lora_rank 0: a full-rank q_proj (DeepSeek-V2-Lite, Kimi Linear)
            q_weights = mla.q_lora_rank * (h + q_out) if mla.q_lora_rank else h * q_out
            weights = h * s.kv_proj_width + q_weights
            out = q_out + s.kv_proj_width
            if arch.dsa is not None:  # the indexer's wq_b, wk, weights_proj (replicated)
                index_q = arch.dsa.index_n_heads * arch.dsa.index_head_dim
                extra = arch.dsa.index_head_dim + arch.dsa.index_n_heads
                weights += mla.q_lora_rank * index_q + h * extra
                out += index_q + extra
            return h, out, weights
        out = s.query_width * (2 if arch.attention_output_gate else 1) + s.kv_proj_width
        return h, out, h * out
    if operand in LATENT_OPERANDS and arch.moe_latent_size:
        # a latent MoE's fc1/fc2_latent_proj, replicated on every GPU (vLLM's ReplicatedLinear)
        latent = arch.moe_latent_size
        return (h, latent, h * latent) if operand == "latent_down" else (latent, h, latent * h)
    if operand == "o":
        o_width = s.heads * (arch.mla.v_head_dim if arch.mla else arch.value_head_dim)
        return o_width, h, o_width * h
    shared = operand.startswith("shared_")
    width = s.shared_width if shared else s.mlp_width
    part = operand.removeprefix("shared_")
    if part == "gate_up":
        return h, 2 * width, 2 * width * h
    if part == "up":
        return h, width, width * h
    return width, h, width * h  # down projection


def _recurrent_projection(
    operand: str, arch: ModelArchitecture, s: ShardShapes
) -> tuple[float, float, float]:
    """in_proj (hidden -> the mixer's inputs), out_proj, or Mamba-1's x_proj and dt_proj of a
    recurrent mixer on one GPU."""
    if operand.startswith("mamba_"):
        assert arch.mamba is not None
        r = mamba_shard(arch.mamba, s.group)
    else:
        assert arch.delta_net is not None
        r = delta_net_shard(arch.delta_net, s.group)
    h = float(s.hidden)
    if operand.endswith("_in"):
        return h, r.in_proj_width, h * r.in_proj_width
    if operand == "delta_net_gate":  # KDA's f_b and g_b: rank key_head_dim -> value width each
        assert arch.delta_net is not None
        rank, width = arch.delta_net.key_head_dim, kda_gate_width(arch.delta_net, s.group)
        return rank, width, rank * width
    if operand in ("mamba_x", "mamba_dt"):  # Mamba-1: d_inner -> dt, B, C; dt -> d_inner
        assert arch.mamba is not None
        rank, x_width = arch.mamba.dt_rank, arch.mamba.x_proj_width
        if operand == "mamba_x":
            return r.out_width, x_width, r.out_width * x_width
        return rank, r.out_width, rank * r.out_width
    return r.out_width, h, r.out_width * h


def norm_work_of(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    """RMSNorm or LayerNorm over the hidden state, or MLA's over its latents (`mla_q_a`: the
    q_lora_rank-wide query latent, `mla_kv_a`: the kv_lora_rank-wide KV latent)."""
    width = float(s.hidden)
    if node.operand in ("mla_q_a", "mla_kv_a") and arch.mla is not None:
        m = arch.mla
        width = float(m.q_lora_rank if node.operand == "mla_q_a" else m.kv_lora_rank)
    elements = p.tokens * width
    read = write = s.activation_bytes  # per element, fused
    if s.unfused_norms:
        read += _UNFUSED_NORM_FP32_READS * _FP32_BYTES
        write += _UNFUSED_NORM_FP32_WRITES * _FP32_BYTES
    return Work(
        cuda_core_ops=_NORM_OPS[arch.norm] * elements,
        special_function_ops=p.tokens,
        weight_bytes=width * s.embedding_bytes * (2 if arch.norm == "layernorm" else 1),
        activation_read_bytes=elements * read,
        activation_write_bytes=elements * write,
    )


def rope_work_of(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    rotary = arch.mla.qk_rope_head_dim if arch.mla else arch.head_dim
    key_heads = 1 if arch.mla else s.k_cache_width // arch.head_dim
    elements = p.tokens * (s.heads + key_heads) * rotary
    return Work(
        cuda_core_ops=3.0 * elements,
        activation_read_bytes=elements * s.activation_bytes + p.tokens * rotary * 4.0,
        activation_write_bytes=elements * s.activation_bytes,
    )


_NO_SPAN = AttentionSpan(0.0, 0.0, 0.0)


def _span(p: PassShape, variant: str) -> AttentionSpan:
    return p.spans.get(variant, _NO_SPAN)


def _attention_parts(
    s: ShardShapes, p: PassShape, span: AttentionSpan, tokens: float, d: AttentionDims
) -> tuple[Work, Work, Work]:
    """(scores, softmax, context) work of `tokens` query tokens over `span`, with widths `d`;
    fused flash attention is their sum minus the scores' trip through memory."""
    scores = p.sequences * s.heads * span.pairs
    reads_k = p.sequences * span.keys_read * d.key_read * d.read_bytes
    reads_v = p.sequences * span.keys_read * (d.value_read or d.key_read) * d.read_bytes
    cache_k, act_k = (reads_k, 0.0) if d.from_cache else (0.0, reads_k)
    cache_v, act_v = (reads_v, 0.0) if d.from_cache else (0.0, reads_v)
    qk = Work(
        tensor_flops=2.0 * scores * d.qk,
        padded_tensor_flops=2.0 * scores * d.qk,
        activation_read_bytes=tokens * s.heads * d.qk * s.activation_bytes + act_k,
        activation_write_bytes=scores * s.activation_bytes,
        kv_cache_read_bytes=cache_k,
        kv_cache_write_bytes=p.sequences
        * span.new_tokens
        * (s.k_cache_width + s.v_cache_width)  # DSA's index keys: the indexer writes them
        * s.kv_bytes,
    )
    softmax = Work(
        cuda_core_ops=_SOFTMAX_OPS * scores,
        special_function_ops=_SOFTMAX_SFU * scores,
        activation_read_bytes=scores * s.activation_bytes,
        activation_write_bytes=scores * s.activation_bytes,
    )
    sv = Work(
        tensor_flops=2.0 * scores * d.v,
        padded_tensor_flops=2.0 * scores * d.v,
        activation_read_bytes=scores * s.activation_bytes + act_v,
        activation_write_bytes=tokens * s.heads * d.v * s.activation_bytes,
        kv_cache_read_bytes=cache_v,
    )
    return qk, softmax, sv


def sparse_kernel_heads(heads: int) -> int:
    """Query heads FlashMLA's sparse kernels compute for `heads` on one GPU: they run 64 or 128
    (vLLM's flashmla_sparse backend pads the fp8 decode kernel's h_q to 64 or 128, and runs the
    bf16 prefill kernel on 128), so fewer heads cost as many as the padded count."""
    return _SPARSE_HEAD_TILE if heads <= _SPARSE_HEAD_TILE else 2 * _SPARSE_HEAD_TILE


def _attended(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> list[tuple[AttentionSpan, float, AttentionDims, ShardShapes]]:
    """(span, query tokens, widths, shapes) of each group of sequences `node` attends for: a
    sliding kernel all of them; a full kernel the prefilling sequences (MLA: un-absorbed) and
    the decoding ones (MLA: absorbed over the latent), service.core.mla. DSA's sparse kernel
    scores all `index_topk` slots of every query (the top-k list is padded, not cut to the
    causal prefix) on its padded heads (`sparse_kernel_heads`), and reads only the keys it
    selected."""
    if node.operand == "sliding":
        span = _span(p, "sliding")
        if arch.dsa is not None:
            pairs = span.new_tokens * arch.dsa.index_topk
            span = AttentionSpan(pairs, span.keys_read, span.new_tokens)
            s = replace(s, heads=sparse_kernel_heads(s.heads))
        return [(span, p.tokens, cached_dims(s), s)]
    decode = _span(p, "decode")
    decode_tokens = p.sequences * decode.new_tokens
    prefill = cached_dims(s) if arch.mla is None else prefill_dims(arch.mla, s)
    return [
        (_span(p, "full"), p.tokens - decode_tokens, prefill, s),
        (decode, decode_tokens, cached_dims(s), s),
    ]


def _fused_attention(
    s: ShardShapes, p: PassShape, span: AttentionSpan, tokens: float, d: AttentionDims
) -> Work:
    qk, softmax, sv = _attention_parts(s, p, span, tokens, d)
    fused = qk.plus(softmax).plus(sv)
    if d.value_read == 0:  # MLA's latent: the fused kernel reads it once, for keys and values
        fused = fused.minus(Work(kv_cache_read_bytes=sv.kv_cache_read_bytes))
    score_bytes = softmax.activation_read_bytes  # scores stay on chip in a fused kernel
    return fused.minus(
        Work(activation_read_bytes=2 * score_bytes, activation_write_bytes=2 * score_bytes)
    )


def attention_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    total = Work()
    for span, tokens, dims, shapes in _attended(node, arch, s, p):
        total = total.plus(_fused_attention(shapes, p, span, tokens, dims))
    return total


def attention_piece(
    index: int,
) -> Callable[[KernelNode, ModelArchitecture, ShardShapes, PassShape], Work]:
    def piece(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
        total = Work()
        for span, tokens, dims, shapes in _attended(node, arch, s, p):
            total = total.plus(_attention_parts(shapes, p, span, tokens, dims)[index])
        return total

    return piece


def residual_add_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    elements = p.tokens * s.hidden
    inputs = 3.0 if arch.parallel_residual else 2.0
    return Work(
        cuda_core_ops=(inputs - 1) * elements,
        activation_read_bytes=inputs * elements * s.activation_bytes,
        activation_write_bytes=elements * s.activation_bytes,
    )


def activation_work(elements: float, arch: ModelArchitecture, s: ShardShapes) -> Work:
    """Activation function over `elements` outputs (gated: times the up projection)."""
    ops, sfu = _ACTIVATION_OPS[arch.activation]
    gated = arch.mlp == "gated"
    return Work(
        cuda_core_ops=(ops + (1.0 if gated else 0.0)) * elements,
        special_function_ops=sfu * elements,
        activation_read_bytes=(2.0 if gated else 1.0) * elements * s.activation_bytes,
        activation_write_bytes=elements * s.activation_bytes,
    )


def activation_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    width = s.shared_width if node.operand == "shared_mlp" else s.mlp_width
    return activation_work(p.tokens * width, arch, s)


def all_reduce_work(tensor_elements: float, group: int, s: ShardShapes) -> Work:
    """Ring all-reduce of `tensor_elements` activations over `group` GPUs."""
    if group <= 1:
        return Work()
    share = (group - 1) / group
    size = tensor_elements * s.activation_bytes
    return Work(
        cuda_core_ops=share * tensor_elements,
        activation_read_bytes=size,
        activation_write_bytes=size,
        network_bytes=2.0 * share * size,
        collective_steps=2.0 * (group - 1),
    )


def all_reduce_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    return all_reduce_work(p.tokens * s.hidden, s.attention_group, s)


def embedding_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    elements = p.tokens * s.hidden
    return Work(
        cuda_core_ops=elements,  # vocab-parallel lookup masks rows outside this GPU's shard
        weight_bytes=elements * s.embedding_bytes / s.attention_group,
        activation_write_bytes=elements * s.activation_bytes,
    )


def lm_head_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    return gemm_work(
        p.logit_rows,
        s.hidden,
        s.vocab,
        s.hidden * s.vocab,
        s,
        p.tile_m,
        weight_bytes_per_element=s.embedding_bytes,
    )


def all_gather_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    group = s.attention_group
    share = (group - 1) / group
    size = p.logit_rows * s.vocab * group * s.activation_bytes
    return Work(
        activation_read_bytes=size / group,
        activation_write_bytes=size,
        network_bytes=share * size,
        collective_steps=float(group - 1),
    )


def sampling_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    logits = p.logit_rows * arch.vocab_size
    return Work(
        cuda_core_ops=_SOFTMAX_OPS * logits,
        special_function_ops=_SOFTMAX_SFU * logits,
        activation_read_bytes=2.0 * logits * _SAMPLING_LOGIT_BYTES,
        activation_write_bytes=logits * _SAMPLING_LOGIT_BYTES,
    )


def send_recv_work_of(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    if node.operand in ("expert_dispatch", "expert_combine"):
        return expert_all_to_all_work(p.tokens, arch, s)
    size = p.tokens * s.hidden * s.activation_bytes / s.attention_group
    return Work(
        activation_read_bytes=size,
        activation_write_bytes=size,
        network_bytes=size,
        collective_steps=1.0,
    )


def expert_all_to_all_work(tokens: float, arch: ModelArchitecture, s: ShardShapes) -> Work:
    """One direction (dispatch or combine) of the routed experts' all-to-all on one GPU, for
    a pass of `tokens` tokens.

    Each of the stage's `group` GPUs sends its 1/group share of the tokens (under attention
    data parallelism its own tokens; under tensor-parallel attention, which leaves every GPU
    the same tokens, a 1/group slice of them, as DeepEP-style layouts do): every token to its
    `experts_per_token` experts, each a row of `hidden` activations, of which (EP - 1) / EP
    live on other GPUs under uniform routing. The most loaded rank receives
    `s.expert_imbalance` times the mean, and a collective ends with its slowest rank. One
    collective step: the sends to all peers run concurrently.
    """
    if s.expert <= 1:
        return Work()
    size = tokens / s.group * arch.experts_per_token * arch.expert_input_width * s.activation_bytes
    remote = (s.expert - 1) / s.expert
    return Work(
        activation_read_bytes=size,
        activation_write_bytes=size,
        network_bytes=size * remote * s.expert_imbalance,
        collective_steps=1.0,
    )
