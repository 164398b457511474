"""Operation and byte counts of the recurrent mixers' kernels (service.core.mixers) on one GPU.

Each count is a part per token plus a part per sequence; a pass has one logit row per sequence,
so the per-sequence part is priced per logit row (the cost plan's basis has no other sequence
term). Per token, prefill runs the chunked algorithms; per sequence, every pass reads and writes
the recurrent state once (prefill: the initial and final state; decode: the state update), with
the recurrent update's arithmetic. A decode token also pays the chunked per-token part, a small
overcount the basis cannot separate (service.core.plan).

- causal_conv1d (causal_conv1d_fn / causal_conv1d_update): a K-tap depthwise convolution per
  channel (2K ops), bias (1) and SiLU (4 ops + 1 exp); the last K-1 inputs are the conv state.
- ssd_scan, Mamba-2's chunked state-space dual (mamba_chunk_scan_combined, chunk Q, per GPU H
  heads of P, G groups, state N): C B^T per chunk and group (2 Q N G FLOP per token), chunk
  states B^T x (2 H P N), intra-chunk output (C B^T o decay) x (2 H Q P) and inter-chunk output
  C h (2 H P N), all on tensor cores; decay masks exp(segsum) (H Q exp per token); chunk states
  in fp32 written by chunk_state, read and rewritten by state_passing, read by chunk_scan
  (4 x H P N x 4 B per chunk of Q tokens). The decode update (selective_state_update)
  h = h exp(dt A) + dt B x, y = C h + D x: 5 ops per state element.
- selective_scan, Mamba-1's scan (selective_scan_fn / selective_state_update, d_inner channels
  of state N each, on CUDA cores): per token and state element, exp(dt A), dt B x, the state
  update and C h (7 ops + 1 exp); per channel the softplus of dt (2 exp), the D skip and the
  SiLU gate of z (6 ops + 1 exp). Its state is read and written once per sequence and pass.
- delta_rule, gated DeltaNet's chunked delta rule (FLA chunk_gated_delta_rule, chunk C, key dim
  dk, value dim dv per value head): K K^T (C dk MAC per token), the triangular solve (C^2 / 3),
  w = A K and u = A V (C dk + C dv), the state recurrence v - w h and h + k^T v (2 dk dv),
  the output q h + (q k^T) v (dk dv + C dk + C dv); chunk states (dk dv per chunk) and w, u
  written and read once. The decode update (fused_recurrent_gated_delta_rule) decays the state,
  forms h^T k, adds the rank-1 correction and reads h^T q: 7 ops per state element.
  Kimi Delta Attention (FLA chunk_kda / fused_recurrent_kda) runs the same chunked algorithm
  with a decay per key channel: its fp32 gate g (value heads x dk per token) is formed by
  fused_kda_gate (-exp(A) softplus(g + bias): 6 ops + 2 exp per element, counted here), written
  and read once, and weights k and q per channel inside the chunk (2 exp per element); the
  intra-chunk q k^T and k k^T cannot be plain matrix products across a per-channel decay: FLA
  forms them on CUDA cores within sub-chunks of 16 tokens, each of the 2 products 16 x dk
  pairs-by-channel per token (an exp and 3 ops each); the decode update decays each state row
  by its own channel (the same 7 ops per element).
- lightning_attention, MiniMax's linear attention with a fixed decay per head (lightning
  attention prefill in blocks of C, linear_decode_forward_triton in decode; dk = dv = d):
  SiLU of q, k, v first (4 ops + 1 exp per element); per token and head, intra-block q k^T
  and its (decay-masked) product with v (2 C d MAC), the inter-block q h (d^2) and the block
  state update k^T v (d^2); the block states (d^2 per block, fp32) written and read once. The
  decode update h = lambda h + k^T v, o = q h: 5 ops per state element.
- LFM2's short conv (causal_conv1d_fn / causal_conv1d_update, vLLM's ShortConv) is that
  conv over B * x, with no bias and no activation, and C times its output: 2K + 2 ops per
  channel; it reads B, C and x and writes y; its state is the conv state alone.
- gated_norm (RMSNormGated): y * SiLU(z) then RMSNorm: 9 ops + 1 exp per element (KDA's and
  lightning attention's sigmoid gate alike).
"""

from __future__ import annotations

from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape
from service.core.graph import KernelNode
from service.core.mixers import RecurrentShard, delta_net_shard, mamba_shard
from service.core.shards import ShardShapes
from service.core.work import Work

_FP32_BYTES = 4.0
_CONV_OPS_PER_TAP, _CONV_BIAS_SILU_OPS = 2.0, 5.0
_MAMBA_UPDATE_OPS, _DELTA_UPDATE_OPS = 5.0, 7.0
_GATED_NORM_OPS = 9.0
_MAMBA_CHUNK_STATE_PASSES = 4.0
_SELECTIVE_OPS, _SELECTIVE_CHANNEL_OPS = 7.0, 6.0
_KDA_GATE_OPS, _KDA_GATE_EXPS = 6.0, 4.0  # fused_kda_gate (2 exp) and the chunk's k, q decay (2)
_KDA_SUB_CHUNK, _KDA_INTRA_OPS = 16.0, 3.0  # FLA chunk_kda's intra-chunk block, ops per term
_LIGHTNING_UPDATE_OPS, _SILU_OPS = 5.0, 4.0
_SHORT_CONV_GATE_OPS = 2.0  # LFM2: B * x before the conv, C * y after it


def recurrent_shard(node: KernelNode, arch: ModelArchitecture, s: ShardShapes) -> RecurrentShard:
    """This GPU's share of the mixer `node` belongs to (operand ``mamba*`` or ``delta_net*``)."""
    if node.operand.startswith("mamba"):
        assert arch.mamba is not None
        return mamba_shard(arch.mamba, s.group)
    assert arch.delta_net is not None
    return delta_net_shard(arch.delta_net, s.group)


def recurrent_state_bytes(arch: ModelArchitecture, s: ShardShapes) -> float:
    """Conv and recurrent state of one sequence over all recurrent layers on one GPU [B]."""
    total = 0.0
    if arch.mamba is not None and arch.num_mamba_layers:
        m = mamba_shard(arch.mamba, s.group)
        ssm_bytes = _FP32_BYTES if arch.mamba.state_fp32 else s.activation_bytes
        per_layer = m.conv_state * s.activation_bytes + m.recurrent_state * ssm_bytes
        total += arch.num_mamba_layers * per_layer
    if arch.delta_net is not None and arch.num_delta_net_layers:
        d = delta_net_shard(arch.delta_net, s.group)
        ssm_bytes = _FP32_BYTES if arch.delta_net.state_fp32 else s.activation_bytes
        per_layer = d.conv_state * s.activation_bytes + d.recurrent_state * ssm_bytes
        total += arch.num_delta_net_layers * per_layer
    return total


def _state_bytes(node: KernelNode, arch: ModelArchitecture, s: ShardShapes) -> float:
    """Bytes per element of `node`'s recurrent state."""
    shape = arch.mamba if node.operand == "mamba" else arch.delta_net
    return _FP32_BYTES if shape is not None and shape.state_fp32 else s.activation_bytes


def causal_conv1d(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    r = recurrent_shard(node, arch, s)
    taps = arch.mamba.conv_kernel if node.operand == "mamba" and arch.mamba else 0
    if node.operand == "delta_net" and arch.delta_net is not None:
        taps = arch.delta_net.conv_kernel
    elements = p.tokens * r.conv_channels
    if node.operand == "delta_net" and arch.delta_net and arch.delta_net.rule == "short_conv":
        return _short_conv(r, taps, elements, s, p)
    return Work(
        cuda_core_ops=(_CONV_OPS_PER_TAP * taps + _CONV_BIAS_SILU_OPS) * elements,
        special_function_ops=elements,
        weight_bytes=r.conv_channels * (taps + 1) * s.embedding_bytes,
        activation_read_bytes=elements * s.activation_bytes,
        activation_write_bytes=elements * s.activation_bytes,
        kv_cache_read_bytes=p.logit_rows * r.conv_state * s.activation_bytes,
        kv_cache_write_bytes=p.logit_rows * r.conv_state * s.activation_bytes,
    )


def _short_conv(
    r: RecurrentShard, taps: int, elements: float, s: ShardShapes, p: PassShape
) -> Work:
    """LFM2's gated short conv: B * x, the K-tap conv (no bias, no activation), C * its output;
    reads B, C and x, writes y."""
    return Work(
        cuda_core_ops=(_CONV_OPS_PER_TAP * taps + _SHORT_CONV_GATE_OPS) * elements,
        weight_bytes=r.conv_channels * taps * s.embedding_bytes,
        activation_read_bytes=3.0 * elements * s.activation_bytes,
        activation_write_bytes=elements * s.activation_bytes,
        kv_cache_read_bytes=p.logit_rows * r.conv_state * s.activation_bytes,
        kv_cache_write_bytes=p.logit_rows * r.conv_state * s.activation_bytes,
    )


def ssd_scan(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    assert arch.mamba is not None
    m, r = arch.mamba, recurrent_shard(node, arch, s)
    heads, dim, state, chunk = r.heads, m.head_dim, m.state_size, m.chunk_size
    groups = (r.conv_channels - r.out_width) / (2 * state)
    macs = chunk * state * groups + 2 * heads * dim * state + heads * chunk * dim
    state_elements = r.recurrent_state
    chunk_state_bytes = _MAMBA_CHUNK_STATE_PASSES * state_elements * _FP32_BYTES / chunk
    state_bytes = p.logit_rows * state_elements * _state_bytes(node, arch, s)
    return Work(
        tensor_flops=2.0 * p.tokens * macs,
        padded_tensor_flops=2.0 * p.tokens * macs,
        cuda_core_ops=p.tokens * heads * (4.0 + 2.0 * chunk + 2.0 * dim)
        + p.logit_rows * _MAMBA_UPDATE_OPS * state_elements,
        special_function_ops=p.tokens * heads * (chunk + 2.0) + p.logit_rows * heads,
        weight_bytes=3.0 * heads * s.embedding_bytes,  # A, D, dt_bias
        activation_read_bytes=p.tokens
        * ((heads * dim + 2 * groups * state + heads) * s.activation_bytes + chunk_state_bytes / 2),
        activation_write_bytes=p.tokens
        * (heads * dim * s.activation_bytes + chunk_state_bytes / 2),
        kv_cache_read_bytes=state_bytes,
        kv_cache_write_bytes=state_bytes,
    )


def selective_scan(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    assert arch.mamba is not None
    m, r = arch.mamba, recurrent_shard(node, arch, s)
    channels, elements = r.out_width, r.recurrent_state  # per sequence: channels x N
    ab = s.activation_bytes
    state_bytes = p.logit_rows * elements * _state_bytes(node, arch, s)
    return Work(
        cuda_core_ops=p.tokens * (_SELECTIVE_OPS * elements + _SELECTIVE_CHANNEL_OPS * channels),
        special_function_ops=p.tokens * (elements + 3.0 * channels),
        weight_bytes=channels * (m.state_size + 2.0) * s.embedding_bytes,  # A, D, dt bias
        activation_read_bytes=p.tokens * (3 * channels + 2 * m.state_size) * ab,  # x, dt, z, B, C
        activation_write_bytes=p.tokens * channels * ab,
        kv_cache_read_bytes=state_bytes,
        kv_cache_write_bytes=state_bytes,
    )


def delta_rule(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    assert arch.delta_net is not None
    d, r = arch.delta_net, recurrent_shard(node, arch, s)
    heads, dk, dv, chunk = r.heads, d.key_head_dim, d.value_head_dim, d.chunk_size
    key_heads = d.num_key_heads * heads / d.num_value_heads
    macs = heads * (3 * chunk * dk + 2 * chunk * dv + 3 * dk * dv + chunk * chunk / 3.0)
    ab = s.activation_bytes
    inputs = (2 * key_heads * dk + heads * dv + 2 * heads) * ab
    # chunk states (dk dv per chunk) and w, u (dk + dv per token), written once and read once
    intermediate = heads * (dk * dv / chunk + dk + dv) * ab
    state_bytes = p.logit_rows * r.recurrent_state * _state_bytes(node, arch, s)
    work = Work(
        tensor_flops=2.0 * p.tokens * macs,
        padded_tensor_flops=2.0 * p.tokens * macs,
        cuda_core_ops=p.tokens * heads * (2.0 * chunk + 6.0 * dk)
        + p.logit_rows * _DELTA_UPDATE_OPS * r.recurrent_state,
        special_function_ops=p.tokens * heads * (chunk + 2.0) + p.logit_rows * 2.0 * heads,
        activation_read_bytes=p.tokens * (inputs + intermediate),
        activation_write_bytes=p.tokens * (heads * dv * ab + intermediate),
        kv_cache_read_bytes=state_bytes,
        kv_cache_write_bytes=state_bytes,
    )
    if d.rule != "kda":
        return work
    gates = p.tokens * heads * dk  # one decay per key channel and token
    intra = 2.0 * _KDA_SUB_CHUNK * gates  # q k^T and k k^T within each sub-chunk, per channel
    return work.plus(
        Work(
            cuda_core_ops=_KDA_GATE_OPS * gates + _KDA_INTRA_OPS * intra,
            special_function_ops=_KDA_GATE_EXPS * gates + intra,
            activation_read_bytes=gates * (ab + _FP32_BYTES),  # f_b's output, then g in the chunk
            activation_write_bytes=gates * _FP32_BYTES,
        )
    )


def lightning_attention(
    node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape
) -> Work:
    assert arch.delta_net is not None
    d, r = arch.delta_net, recurrent_shard(node, arch, s)
    heads, dim, block = r.heads, d.key_head_dim, d.chunk_size
    macs = heads * (2.0 * block * dim + 2.0 * dim * d.value_head_dim)
    qkv = heads * (2.0 * dim + d.value_head_dim)  # per token
    ab = s.activation_bytes
    block_states = heads * dim * d.value_head_dim * _FP32_BYTES / block  # per token
    state_bytes = p.logit_rows * r.recurrent_state * _state_bytes(node, arch, s)
    return Work(
        tensor_flops=2.0 * p.tokens * macs,
        padded_tensor_flops=2.0 * p.tokens * macs,
        cuda_core_ops=p.tokens * (_SILU_OPS * qkv + heads * 2.0 * block)
        + p.logit_rows * _LIGHTNING_UPDATE_OPS * r.recurrent_state,
        special_function_ops=p.tokens * qkv,
        activation_read_bytes=p.tokens * (qkv * ab + block_states),
        activation_write_bytes=p.tokens * (heads * d.value_head_dim * ab + block_states),
        kv_cache_read_bytes=state_bytes,
        kv_cache_write_bytes=state_bytes,
    )


def gated_norm(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    r = recurrent_shard(node, arch, s)
    elements = p.tokens * r.out_width
    return Work(
        cuda_core_ops=_GATED_NORM_OPS * elements,
        special_function_ops=elements + p.tokens * r.heads,
        weight_bytes=r.out_width * s.embedding_bytes,
        activation_read_bytes=2.0 * elements * s.activation_bytes,
        activation_write_bytes=elements * s.activation_bytes,
    )
