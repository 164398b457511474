"""Multi-head latent attention (DeepSeek V2/V3/R1/V3.1, Kimi K2) as serving engines run it:
un-absorbed in prefill, weight-absorbed in decode.

vLLM's MLA backend (vllm/v1/attention/backends/mla/common.py, module docstring,
`_forward_prefill` vs `_forward_decode`) and TensorRT-LLM compute the two phases differently:
- prefill ("compute friendly"): kv_b_proj decompresses the latent kv_c of every prompt key,
  cached prefix included (`_compute_prefill_context`), into per-head k_nope and v; attention is
  then ordinary multi-head attention with QK over qk_nope + qk_rope (192 in DeepSeek-V3) and
  V over v_head_dim (128) per head.
- decode ("data-movement friendly"): q_nope is absorbed through W_UK (q_nope x W_UK_T, a
  batched GEMM per head), attention runs MQA-like over the one 576-wide latent per key
  (kv_lora_rank + qk_rope_head_dim, read once for keys and values), its 512-wide output goes
  out through W_UV.
Both W_UK/W_UV and kv_b_proj are slices of the same kv_b_proj weight
(kv_lora_rank x heads x (qk_nope + v_head)), so one GEMM node (`KV_UP_OPERAND`) prices them,
with the weight read once per pass: a GEMM over the prompt keys a prefill decompresses and one
over the query tokens a decode absorbs, each padded to the GEMM tile on its own. Shapes
from DeepSeek-V3's config.json (https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/
config.json): kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.core.architecture import MlaShape
from service.core.shards import ShardShapes

KV_UP_OPERAND = "mla_kv_up"
"""Operand of the kv_b_proj GEMM node: prefill decompression and decode absorption."""


@dataclass(frozen=True, slots=True)
class AttentionDims:
    """Per-head widths one attention kernel computes with, and what it reads per key.

    Attributes:
        qk: query-key dot-product width per head [elements].
        v: value width per head [elements].
        key_read: elements read per context key for the keys.
        value_read: elements read per key for the values; 0 when the keys' read serves them
            (MLA's latent: a fused kernel reads it once).
        read_bytes: bytes per element read.
        from_cache: whether the keys come from the KV cache (else from activations: MLA
            prefill reads the decompressed keys and values kv_b_proj just wrote).
    """

    qk: float
    v: float
    key_read: float
    value_read: float
    read_bytes: float
    from_cache: bool = True


def cached_dims(s: ShardShapes) -> AttentionDims:
    """Attention over the KV cache as stored: per-head K/V, or MLA's absorbed latent."""
    return AttentionDims(s.qk_head_dim, s.v_head_dim, s.k_cache_width, s.v_cache_width, s.kv_bytes)


def prefill_dims(mla: MlaShape, s: ShardShapes) -> AttentionDims:
    """Un-absorbed MLA prefill: per-head keys of qk_nope + qk_rope, values of v_head_dim, both
    read from kv_b_proj's output (k_pe broadcast to every head, as flash-attention takes it)."""
    qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    return AttentionDims(
        qk, mla.v_head_dim, s.heads * qk, s.heads * mla.v_head_dim, s.activation_bytes, False
    )


def kv_up_shape(mla: MlaShape, s: ShardShapes) -> tuple[float, float, float]:
    """(in_features, out_features, weight elements) of kv_b_proj on one GPU: the latent
    (kv_lora_rank) to per-head k_nope and v. Absorbed in decode, the same weight elements
    multiply q_nope (W_UK) and the latent output (W_UV), so the FLOPs per row are equal."""
    out = s.heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    return float(mla.kv_lora_rank), float(out), float(mla.kv_lora_rank * out)


INDEXER = "indexer"
"""Operand of DSA's lightning-indexer node (service.core.dsa)."""
