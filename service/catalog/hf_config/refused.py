"""Model types whose layers the cost model cannot price yet, with the reason the 422 gives."""

from __future__ import annotations

_STATE_SPACE = "state-space (Mamba) layers"
_HYBRID = "a hybrid of Mamba-2 state-space layers and attention"
_LINEAR = "linear attention (recurrent state instead of a KV cache)"

REFUSED_MODEL_TYPES: dict[str, str] = {
    "mamba": _STATE_SPACE,
    "mamba2": _STATE_SPACE,
    "falcon_mamba": _STATE_SPACE,
    "nemotron_h": _HYBRID,
    "granitemoehybrid": _HYBRID,
    "falcon_h1": _HYBRID,
    "jamba": _HYBRID,
    "bamba": _HYBRID,
    "zamba": _HYBRID,
    "zamba2": _HYBRID,
    "plamo2": _HYBRID,
    "lfm2": "a hybrid of gated short convolutions and attention",
    "lfm2_moe": "a hybrid of gated short convolutions and attention",
    "qwen3_next": "gated DeltaNet " + _LINEAR + " on 3 of every 4 layers",
    "kimi_linear": "Kimi Delta Attention, " + _LINEAR,
    "minimax": "lightning attention, " + _LINEAR,
    "rwkv": _LINEAR,
    "recurrent_gemma": "RG-LRU recurrent layers",
    "gemma3n": "per-layer embeddings, AltUp and activation sparsity",
    "mllama": "cross-attention layers over image tokens",
    "nemotron-nas": "layers of differing shapes (neural architecture search)",
}


def refusal(model_type: str) -> str | None:
    """Why `model_type` cannot be priced, or None when nothing stands in the way."""
    return REFUSED_MODEL_TYPES.get(model_type)
