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
    `mamba_ssm_cache_dtype`), else in the activation dtype."""

    num_heads: int
    head_dim: int
    state_size: int
    n_groups: int
    conv_kernel: int = 4
    chunk_size: int = 256
    state_fp32: bool = False

    @property
    def inner_width(self) -> int:
        """d_inner = heads x head_dim [elements]."""
        return self.num_heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        """Channels of the causal conv1d: x, B and C (d_inner + 2 G N) [elements]."""
        return self.inner_width + 2 * self.n_groups * self.state_size

    @property
    def in_proj_width(self) -> int:
        """Output width of in_proj: z, x, B, C and dt (2 d_inner + 2 G N + heads)."""
        return self.inner_width + self.conv_channels + self.num_heads

    def weight_elements(self, hidden: int) -> float:
        """in_proj, conv1d and out_proj weights of one layer (A, D, dt_bias and norm left out,
        as norms are elsewhere)."""
        conv = self.conv_channels * self.conv_kernel
        return float(hidden * self.in_proj_width + conv + self.inner_width * hidden)


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
        conv = self.conv_channels * self.conv_kernel
        return float(hidden * self.in_proj_width + conv + self.value_width * hidden)


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
    groups = m.n_groups / group if m.n_groups % group == 0 else float(m.n_groups)
    inner = heads * m.head_dim
    conv = inner + 2 * groups * m.state_size
    return RecurrentShard(
        heads=heads,
        conv_channels=conv,
        in_proj_width=inner + conv + heads,
        out_width=inner,
        conv_state=(m.conv_kernel - 1) * conv,
        recurrent_state=heads * m.head_dim * m.state_size,
    )


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
