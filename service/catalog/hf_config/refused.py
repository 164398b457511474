"""Model types whose layers the cost model cannot price yet, with the reason the 422 gives."""

from __future__ import annotations

_HYBRID = "a hybrid of Mamba-2 state-space layers and attention"
_LINEAR = "linear attention (recurrent state instead of a KV cache)"

REFUSED_MODEL_TYPES: dict[str, str] = {
    "zamba": _HYBRID,
    "zamba2": _HYBRID,
    "plamo2": _HYBRID,
    "lfm2_moe": "a hybrid of gated short convolutions and attention",
    "rwkv": _LINEAR,
    "recurrent_gemma": "RG-LRU recurrent layers",
    "gemma3n": "per-layer embeddings, AltUp and activation sparsity",
}


def refusal(model_type: str) -> str | None:
    """Why `model_type` cannot be priced, or None when nothing stands in the way."""
    return REFUSED_MODEL_TYPES.get(model_type)
