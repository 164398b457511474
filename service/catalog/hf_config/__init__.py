"""A model's Hugging Face config.json, as published, read into the cost model's architecture.

`read_config` recognises the config by its `model_type` and reads it the way the model's
transformers config class does (its defaults where a key is absent, the text sub-config of a
multimodal model); keys it does not need are ignored. A config it cannot price raises a core
error naming the key at fault (`field`, a dotted path inside the config) or `model_type`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from service.catalog.hf_config import (
    classic,
    delta_net,
    dense,
    early_moe,
    gemma,
    hybrid,
    lfm2,
    linear_hybrids,
    mla,
    moe,
    nas,
    remote_code,
    two_shapes,
)
from service.catalog.hf_config.multimodal import (
    TEXT_MODEL_TYPES,
    Reader,
    read_mllama_text,
    read_qwen2_vl,
    read_text_decoder,
    text_view,
)
from service.catalog.hf_config.precision import published_precision
from service.catalog.hf_config.refused import refusal
from service.catalog.hf_config.view import ConfigView
from service.core.architecture import ModelArchitecture
from service.core.cost_model_errors import UnsupportedArchitecture
from service.core.dtypes import DType

TEXT_READERS: dict[str, Reader] = {
    "llama": dense.read_llama,
    "mistral": dense.read_mistral,
    "ministral3": dense.read_ministral3,
    "qwen2": dense.read_qwen2,
    "mimo": dense.read_mimo,
    "qwen3": dense.read_qwen3,
    "qwen3_vl_text": dense.read_qwen3_vl_text,
    "granite": dense.read_granite,
    "olmo": dense.read_olmo,
    "stablelm": dense.read_stablelm,
    "qwen": dense.read_qwen,
    "olmo2": dense.read_olmo2,
    "olmo3": dense.read_olmo3,
    "exaone4": dense.read_exaone4,
    "exaone4_5_text": dense.read_exaone4,
    "glm": dense.read_glm,
    "glm4": dense.read_glm4,
    "chatglm": remote_code.read_chatglm,
    "baichuan": remote_code.read_baichuan,
    "internlm2": dense.read_internlm2,
    "chameleon": dense.read_chameleon,
    "smollm3": dense.read_smollm3,
    "phi3": dense.read_phi3,
    "cohere": dense.read_cohere,
    "cohere2": dense.read_cohere2,
    "nemotron": dense.read_nemotron,
    "nemotron-nas": nas.read_nemotron_nas,
    "gemma": gemma.read_gemma,
    "gemma2": gemma.read_gemma2,
    "gemma3_text": gemma.read_gemma3_text,
    "gemma4_text": two_shapes.read_gemma4_text,
    "mimo_v2_flash": two_shapes.read_mimo_v2_flash,
    "phi": classic.read_phi,
    "starcoder2": classic.read_starcoder2,
    "gpt_neox": classic.read_gpt_neox,
    "gptj": classic.read_gptj,
    "gpt_neo": classic.read_gpt_neo,
    "gpt2": classic.read_gpt2,
    "gpt_bigcode": classic.read_gpt_bigcode,
    "falcon": classic.read_falcon,
    "bloom": classic.read_bloom,
    "opt": classic.read_opt,
    "mixtral": moe.read_mixtral,
    "phimoe": moe.read_phimoe,
    "qwen2_moe": moe.read_qwen2_moe,
    "qwen3_moe": moe.read_qwen3_moe,
    "qwen3_vl_moe_text": moe.read_qwen3_vl_moe_text,
    "granitemoe": moe.read_granitemoe,
    "granitemoeshared": moe.read_granitemoe,
    "olmoe": moe.read_olmoe,
    "gpt_oss": moe.read_gpt_oss,
    "minimax_m2": moe.read_minimax_m2,
    "glm4_moe": moe.read_glm4_moe,
    "llama4_text": moe.read_llama4_text,
    "dbrx": early_moe.read_dbrx,
    "deepseek": early_moe.read_deepseek,
    "deepseek_v2": mla.read_deepseek_v2,
    "deepseek_v3": mla.read_deepseek_v3,
    "deepseek_v32": mla.read_deepseek_v32,
    "glm_moe_dsa": mla.read_glm_moe_dsa,
    "kimi_k2": mla.read_deepseek_v3,
    "nemotron_h": hybrid.read_nemotron_h,
    "granitemoehybrid": hybrid.read_granitemoehybrid,
    "falcon_h1": hybrid.read_falcon_h1,
    "mamba2": hybrid.read_mamba2,
    "mamba": hybrid.read_mamba,
    "falcon_mamba": hybrid.read_mamba,
    "bamba": hybrid.read_bamba,
    "jamba": hybrid.read_jamba,
    "qwen3_next": delta_net.read_qwen3_next,
    "qwen3_5_text": delta_net.read_qwen3_5_text,
    "qwen3_5_moe_text": delta_net.read_qwen3_5_moe_text,
    "kimi_linear": linear_hybrids.read_kimi_linear,
    "minimax": linear_hybrids.read_minimax,
    "minimax_text_01": linear_hybrids.read_minimax,
    "minimax_m1": linear_hybrids.read_minimax,
    "lfm2": lfm2.read_lfm2,
    "qwen2_vl": read_qwen2_vl,
    "mllama_text_model": read_mllama_text,
    "qwen2_5_vl": read_qwen2_vl,
}
SUPPORTED_MODEL_TYPES = tuple(sorted([*TEXT_READERS, *TEXT_MODEL_TYPES]))


@dataclass(frozen=True, slots=True)
class ConfigArchitecture:
    """A config.json read: its model_type, the architecture, the weights' published precision,
    notes on what the cost model approximates, and the keys the config class defaulted (dotted
    paths, with the default taken)."""

    model_type: str
    architecture: ModelArchitecture
    published_precision: DType
    notes: tuple[str, ...]
    defaulted: Mapping[str, Any]


def read_config(raw: Mapping[str, Any]) -> ConfigArchitecture:
    """The architecture `raw` (a config.json object) describes; raises UnsupportedArchitecture
    (field `model_type`) for a model type not read or not priceable, InvalidArchitecture or
    UnsupportedArchitecture naming the key for a config that cannot be priced."""
    view = ConfigView(raw)
    model_type = view.text("model_type", "")
    reason = refusal(model_type)
    if reason is not None:
        raise UnsupportedArchitecture(
            f"model_type {model_type!r} cannot be priced: its layers are {reason}, which the "
            "per-kernel cost model does not price yet",
            field="model_type",
        )
    if model_type in TEXT_MODEL_TYPES:
        reading = read_text_decoder(view, model_type, TEXT_READERS)
        text = text_view(view)
    elif model_type in TEXT_READERS:
        reading = TEXT_READERS[model_type](view)
        text = view.sub("text_config") or view
    else:
        close = difflib.get_close_matches(model_type, SUPPORTED_MODEL_TYPES, n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnsupportedArchitecture(
            f"model_type {model_type!r} is not one this service reads{hint}; it reads "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}",
            field="model_type",
        )
    precision = published_precision(view, text)
    arch = replace(
        reading.architecture(),
        fp8_block_scaled=precision.fp8_block_scaled,
        int4_group_size=precision.int4_group_size,
    )
    notes = (*reading.notes, *precision.notes)
    return ConfigArchitecture(model_type, arch, precision.weights, notes, dict(view.defaulted))
