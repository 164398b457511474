"""The precision a config.json says its weights were published in: `quantization_config` where
there is one, else `torch_dtype` (`dtype` in configs saved by transformers >= 4.56), else fp32,
the dtype transformers and vLLM load a config without one in."""

from __future__ import annotations

from dataclasses import dataclass

from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import UnsupportedPrecision
from service.core.dtypes import INT4_GROUP_SIZE, DType, parse_dtype

# FP4 (E2M1) weights with one scale per this many elements: NVFP4's FP8 scale per 16, MXFP4's
# E8M0 scale per 32 (compressed-tensors writes the block as the weights' `group_size`).
_FP4_BY_GROUP = {16: DType.NVFP4, 32: DType.MXFP4}


@dataclass(frozen=True, slots=True)
class PublishedPrecision:
    """The weights' published precision, whether FP8 scales are per 128 x 128 block, the int4
    weights per scale (0: per output channel), and what was assumed to get there."""

    weights: DType
    fp8_block_scaled: bool = False
    int4_group_size: int = INT4_GROUP_SIZE
    notes: tuple[str, ...] = ()


def published_precision(view: ConfigView, text: ConfigView) -> PublishedPrecision:
    """From the top-level config (`view`) or, failing that, its text sub-config (`text`)."""
    quantization = view.sub("quantization_config") or text.sub("quantization_config")
    stored = _stored_dtype(view) or _stored_dtype(text)
    if quantization is not None:
        found = _quantized(quantization)
        if found is not None:
            return found
        method = quantization.text("quant_method", "unnamed")
        return PublishedPrecision(
            stored or DType.FP32,
            notes=(
                f"quantization_config.quant_method {method!r} is not one this service reads: "
                f"weights priced in {(stored or DType.FP32).value}; give precision.weights",
            ),
        )
    return PublishedPrecision(stored or DType.FP32)


def _stored_dtype(view: ConfigView) -> DType | None:
    for key in ("dtype", "torch_dtype"):
        if view.raw.get(key) is None:
            continue
        name = view.text(key, "")
        try:
            return parse_dtype(name, field=view.field(key))
        except UnsupportedPrecision:
            return None  # e.g. "auto": the stored dtype says nothing
    return None


def _quantized(q: ConfigView) -> PublishedPrecision | None:
    """The weight format of a quantization_config, None for one not recognised."""
    method = q.text("quant_method", "").lower()
    if method in ("fp8", "fbgemm_fp8"):
        return PublishedPrecision(
            DType.FP8, fp8_block_scaled=q.raw.get("weight_block_size") is not None
        )
    if method == "mxfp4":
        return PublishedPrecision(DType.MXFP4)
    if method in ("awq", "gptq", "auto-round", "autoround"):
        return _integer(q.count("bits", 4), _group_size(q))
    if method == "bitsandbytes":
        if q.flag("load_in_4bit", False):
            return PublishedPrecision(DType.INT4)
        return PublishedPrecision(DType.INT8) if q.flag("load_in_8bit", False) else None
    if method == "modelopt":
        algo = q.text("quant_algo", "").upper()
        if algo == "FP8":
            return PublishedPrecision(DType.FP8)
        return PublishedPrecision(DType.NVFP4) if algo == "NVFP4" else None
    if method == "compressed-tensors":
        return _compressed_tensors(q)
    return None


def _integer(bits: int, group_size: int = INT4_GROUP_SIZE) -> PublishedPrecision | None:
    if bits == 4:
        return PublishedPrecision(DType.INT4, int4_group_size=group_size)
    return PublishedPrecision(DType.INT8) if bits == 8 else None


def _group_size(q: ConfigView) -> int:
    """Weights per int4 scale: `group_size` (AWQ's `q_group_size`), -1 (per channel) -> 0."""
    for key in ("group_size", "q_group_size"):
        value = q.raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return max(value, 0)
    return INT4_GROUP_SIZE


def _compressed_tensors(q: ConfigView) -> PublishedPrecision | None:
    """llm-compressor's format: the first config group's weight scheme (num_bits, type)."""
    groups = q.sub("config_groups")
    if groups is None:
        return None
    for name in groups.raw:
        group = groups.sub(name)
        weights = group.sub("weights") if group is not None else None
        if weights is None:
            continue
        bits, kind = weights.count("num_bits", 0), weights.text("type", "int")
        if kind == "float" and bits == 8:
            return PublishedPrecision(
                DType.FP8, fp8_block_scaled=weights.raw.get("block_structure") is not None
            )
        if kind == "float" and bits == 4:
            fp4 = _FP4_BY_GROUP.get(weights.count("group_size", 16))
            return None if fp4 is None else PublishedPrecision(fp4)
        return _integer(bits, _group_size(weights)) if kind == "int" else None
    return None
