"""Recurrent token mixers that replace attention on some layers: Mamba-2 state-space layers and
gated-DeltaNet linear attention. Sizes are element counts.

Both keep a fixed-size state per sequence instead of a KV cache: the last `conv_kernel - 1`
inputs of a causal depthwise convolution, and the recurrent state (Mamba-2: heads x head_dim x
state_size; gated DeltaNet: value heads x key_head_dim x value_head_dim). Shapes follow vLLM's
MambaMixer2 (vllm/model_executor/layers/mamba/mamba_mixer2.py) and GatedDeltaNet
(vllm/model_executor/models/qwen3_next.py).
"""

from __future__ import annotations

from dataclasses import dataclass


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
    """A gated-DeltaNet mixer (Qwen3-Next, Qwen3.5): queries and keys of `num_key_heads` x
    `key_head_dim`, values of `num_value_heads` x `value_head_dim`; queries and keys are shared
    by `num_value_heads / num_key_heads` value heads. `chunk_size` is the chunked delta rule's
    (FLA's chunk_gated_delta_rule: 64). `state_fp32`: the recurrent state is kept in fp32
    (Qwen3.5's `mamba_ssm_dtype`), else in the activation dtype."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int = 4
    chunk_size: int = 64
    state_fp32: bool = False

    @property
    def key_width(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_width(self) -> int:
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        """Channels of the causal conv1d: q, k and v [elements]."""
        return 2 * self.key_width + self.value_width

    @property
    def in_proj_width(self) -> int:
        """in_proj_qkvz plus in_proj_ba output width: q, k, v, z, beta and the gate a."""
        return self.conv_channels + self.value_width + 2 * self.num_value_heads

    def weight_elements(self, hidden: int) -> float:
        """in_proj_qkvz, in_proj_ba, conv1d and out_proj weights of one layer."""
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
    value_heads = d.num_value_heads / group
    conv = (2 * d.key_width + d.value_width) / group
    value = d.value_width / group
    return RecurrentShard(
        heads=value_heads,
        conv_channels=conv,
        in_proj_width=conv + value + 2 * value_heads,
        out_width=value,
        conv_state=(d.conv_kernel - 1) * conv,
        recurrent_state=value_heads * d.key_head_dim * d.value_head_dim,
    )


def delta_net_weight_elements(d: DeltaNetShape, hidden: int, group: int) -> float:
    """The weights one of `group` tensor-parallel GPUs holds of one gated-DeltaNet layer."""
    r = delta_net_shard(d, group)
    return float(hidden * r.in_proj_width + r.conv_channels * d.conv_kernel + r.out_width * hidden)
