"""Recurrent token mixers that replace attention on some layers: Mamba-2 (and Mamba-1)
state-space layers and linear attention (gated DeltaNet, Kimi Delta Attention, MiniMax's
lightning attention). Sizes are element counts.

All keep a fixed-size state per sequence instead of a KV cache: the last `conv_kernel - 1`
inputs of a causal depthwise convolution (none in lightning attention), and the recurrent state
(Mamba-2: heads x head_dim x state_size; linear attention: value heads x key_head_dim x
value_head_dim). Shapes follow vLLM's MambaMixer2 (vllm/model_executor/layers/mamba/
mamba_mixer2.py), GatedDeltaNet (vllm/model_executor/models/qwen3_next.py), KimiDeltaAttention
(vllm/model_executor/layers/kda.py) and MiniMaxText01LinearAttention
(vllm/model_executor/models/minimax_text_01.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LinearRule = Literal["gated_delta", "kda", "lightning", "short_conv"]


@dataclass(frozen=True, slots=True)
class MambaShape:
    """A Mamba-2 mixer: `num_heads` x `head_dim` is d_inner; B and C carry `n_groups` x
    `state_size` each. `state_fp32`: the recurrent state is kept in fp32 (vLLM's
    `mamba_ssm_cache_dtype`), else in the activation dtype.

    `dt_rank` > 0 makes it a Mamba-1 mixer (Jamba): one state of `state_size` per channel of
    d_inner (taken as d_inner heads of one), B, C and the rank-`dt_rank` time step projected
    from x by x_proj (B and C shared by all channels: one group), dt widened by dt_proj, the
    conv over x alone, and in_proj giving x and the gate z."""

    num_heads: int
    head_dim: int
    state_size: int
    n_groups: int
    conv_kernel: int = 4
    chunk_size: int = 256
    state_fp32: bool = False
    dt_rank: int = 0

    @property
    def selective(self) -> bool:
        """Mamba-1's selective scan rather than Mamba-2's state-space dual."""
        return self.dt_rank > 0

    @property
    def inner_width(self) -> int:
        """d_inner = heads x head_dim [elements]."""
        return self.num_heads * self.head_dim

    @property
    def x_proj_width(self) -> int:
        """Mamba-1's x_proj output: dt (rank dt_rank), B and C."""
        return self.dt_rank + 2 * self.state_size

    def weight_elements(self, hidden: int) -> float:
        """in_proj, conv1d, x_proj and dt_proj (Mamba-1) and out_proj weights of one layer (A,
        D, dt_bias and norm left out, as norms are elsewhere)."""
        return mamba_weight_elements(self, hidden, 1)


@dataclass(frozen=True, slots=True)
class DeltaNetShape:
    """A linear-attention mixer: queries and keys of `num_key_heads` x `key_head_dim`, values of
    `num_value_heads` x `value_head_dim`; queries and keys are shared by
    `num_value_heads / num_key_heads` value heads. `chunk_size` is the chunked kernel's block
    (FLA's chunk_gated_delta_rule and chunk_kda: 64; lightning attention: 256). `state_fp32`:
    the recurrent state is kept in fp32 (Qwen3.5's `mamba_ssm_dtype`), else in the activation
    dtype.

    `rule` is the recurrence:
    - ``gated_delta`` (Qwen3-Next, Qwen3.5): the delta rule with one scalar decay per head;
      in_proj gives q, k, v, the output gate z, beta and the decay input a.
    - ``kda`` (Kimi Linear): the delta rule with a decay per key channel; q, k, v and beta from
      the hidden state, the decay and the output gate each through a rank-`key_head_dim`
      bottleneck (f_a/f_b, g_a/g_b: hidden -> key_head_dim replicated, then -> value width).
    - ``lightning`` (MiniMax-Text-01, MiniMax-M1): linear attention with a fixed decay per head
      and no delta correction; qkv_proj and output_gate from the hidden state, no conv1d
      (`conv_kernel` 0).
    - ``short_conv`` (LFM2's gated short convolution, vLLM's ShortConv in
      vllm/model_executor/layers/mamba/short_conv.py): no recurrence, only the conv. in_proj
      gives B, C and x (3 x hidden), B * x goes through a depthwise causal conv1d of
      `conv_kernel` taps (`conv_L_cache`), C gates its output, out_proj maps it back; the state
      is the conv's last `conv_kernel - 1` inputs alone. Its channels are written as heads of
      one element (`num_value_heads` = hidden, head dims 1), as Mamba-1's are, so a tensor-
      parallel split divides them as vLLM does."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int = 4
    chunk_size: int = 64
    state_fp32: bool = False
    rule: LinearRule = "gated_delta"

    @property
    def key_width(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_width(self) -> int:
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        """Channels of the causal conv1d: q, k and v [elements] (none without a conv)."""
        if self.rule == "short_conv":
            return self.value_width
        return 0 if self.rule == "lightning" else 2 * self.key_width + self.value_width

    @property
    def in_proj_width(self) -> float:
        """Output width of the projections from the hidden state (whole layer)."""
        return delta_net_shard(self, 1).in_proj_width

    def weight_elements(self, hidden: int) -> float:
        """Projection, conv1d and out_proj weights of one layer."""
        return delta_net_weight_elements(self, hidden, 1)


@dataclass(frozen=True, slots=True)
class RecurrentShard:
    """One GPU's share of a recurrent mixer under `group`-way tensor parallelism: heads split,
    Mamba groups split when they divide (a single group is replicated, as vLLM does), conv
    channels with them. Widths in elements; state elements per sequence."""

    heads: float
    conv_channels: float
    in_proj_width: float
    out_width: float
    conv_state: float
    recurrent_state: float


def mamba_shard(m: MambaShape, group: int) -> RecurrentShard:
    heads = m.num_heads / group
    inner = heads * m.head_dim
    if m.selective:  # Mamba-1: conv over x; in_proj gives x and z
        conv, in_proj = inner, 2 * inner
    else:  # Mamba-2: conv over x, B and C; in_proj gives z, x, B, C and dt
        groups = m.n_groups / group if m.n_groups % group == 0 else float(m.n_groups)
        conv = inner + 2 * groups * m.state_size
        in_proj = inner + conv + heads
    return RecurrentShard(
        heads=heads,
        conv_channels=conv,
        in_proj_width=in_proj,
        out_width=inner,
        conv_state=(m.conv_kernel - 1) * conv,
        recurrent_state=heads * m.head_dim * m.state_size,
    )


def mamba_weight_elements(m: MambaShape, hidden: int, group: int) -> float:
    """The weights one of `group` tensor-parallel GPUs holds of one Mamba layer: in_proj, conv1d
    and out_proj (and Mamba-1's x_proj and dt_proj) on its share of the channels."""
    r = mamba_shard(m, group)
    total = hidden * r.in_proj_width + r.conv_channels * m.conv_kernel + r.out_width * hidden
    if m.selective:
        total += r.out_width * m.x_proj_width + m.dt_rank * r.out_width
    return float(total)


def delta_net_shard(d: DeltaNetShape, group: int) -> RecurrentShard:
    """in_proj_width per rule: gated DeltaNet q, k, v, z, beta, a; KDA q, k, v, beta and the two
    replicated rank-key_head_dim bottlenecks (f_a, g_a); lightning q, k, v and the output
    gate; short_conv B, C and x, and no recurrent state."""
    value_heads = d.num_value_heads / group
    if d.rule == "short_conv":
        channels = d.value_width / group
        return RecurrentShard(
            heads=value_heads,
            conv_channels=channels,
            in_proj_width=3 * channels,
            out_width=channels,
            conv_state=(d.conv_kernel - 1) * channels,
            recurrent_state=0.0,
        )
    qkv = (2 * d.key_width + d.value_width) / group
    value = d.value_width / group
    conv = 0.0 if d.rule == "lightning" else qkv
    if d.rule == "kda":
        in_proj = qkv + value_heads + 2 * d.key_head_dim
    else:  # gated DeltaNet: z, beta, a; lightning: the output gate
        in_proj = qkv + value + (2 * value_heads if d.rule == "gated_delta" else 0.0)
    return RecurrentShard(
        heads=value_heads,
        conv_channels=conv,
        in_proj_width=in_proj,
        out_width=value,
        conv_state=max(d.conv_kernel - 1, 0) * conv,
        recurrent_state=value_heads * d.key_head_dim * d.value_head_dim,
    )


def kda_gate_width(d: DeltaNetShape, group: int) -> float:
    """Output width of KDA's f_b and g_b projections together (rank key_head_dim -> the value
    width each) on one of `group` GPUs; 0 for the other rules."""
    return 2.0 * d.value_width / group if d.rule == "kda" else 0.0


def delta_net_weight_elements(d: DeltaNetShape, hidden: int, group: int) -> float:
    """The weights one of `group` tensor-parallel GPUs holds of one linear-attention layer."""
    r = delta_net_shard(d, group)
    gate_up = d.key_head_dim * kda_gate_width(d, group)
    return float(
        hidden * r.in_proj_width + gate_up + r.conv_channels * d.conv_kernel + r.out_width * hidden
    )
