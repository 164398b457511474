"""Reader of NVIDIA's neural-architecture-searched Llama derivatives (model_type `nemotron-nas`:
Llama-3.3-Nemotron-Super-49B, Llama-3.1-Nemotron-Ultra-253B, Nemotron-51B): a Llama decoder
whose `block_configs` give each layer its own attention (GQA of `n_heads_in_group` query heads
per KV head, or none: `no_op`) and its own FFN width (`ffn_mult`, or none).

Read as vLLM's DeciLMForCausalLM (vllm/model_executor/models/nemotron_nas.py) and SGLang's
(python/sglang/srt/models/nemotron_nas.py) build the layers: an attention `no_op` drops the
layer's attention and its input norm, an FFN `no_op` its MLP and post-attention norm; the FFN
width is int(2 x ffn_mult x hidden / 3) rounded up to a multiple of 256.
"""

from __future__ import annotations

from typing import Any

from service.catalog.hf_config.dense import LLAMA
from service.catalog.hf_config.reading import Reading, read_decoder
from service.catalog.hf_config.view import ConfigView
from service.core.cost_model_errors import InvalidArchitecture, UnsupportedArchitecture

# Block options whose layers the per-kernel cost model has no kernel for (a linear layer in
# place of attention or of the FFN, sink or windowed attention variants, sparsified layers).
_UNPRICED = {
    "attention": ("replace_with_linear", "sparsify", "num_sink_tokens", "window_length"),
    "ffn": ("replace_with_linear", "sparsify"),
}


def ffn_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM's FFN width of a block [elements]: int(2 x ffn_mult x hidden / 3), rounded up to
    a multiple of 256."""
    width = int(2 * ffn_mult * hidden / 3)
    return -(-width // 256) * 256


def _block_part(view: ConfigView, blocks: list[Any], i: int, part: str) -> dict[str, Any]:
    field = view.field(f"block_configs[{i}].{part}")
    value = blocks[i].get(part, {}) if isinstance(blocks[i], dict) else None
    if not isinstance(value, dict):
        raise InvalidArchitecture(f"{field} must be an object", field=field)
    for option in _UNPRICED[part]:
        if value.get(option):
            raise UnsupportedArchitecture(
                f"{field}.{option}: this block variant is not priced by the per-kernel cost "
                "model yet",
                field=f"{field}.{option}",
            )
    return value


def read_nemotron_nas(view: ConfigView) -> Reading:
    """DeciLMConfig: the layers `block_configs` lists. Attention layers must share one KV-head
    count (the model has one attention shape); FFN widths differ per layer and are priced at
    their mean, to which every MLP count (GEMM FLOPs, weights, activations) is linear (exact to
    under one element per layer)."""
    reading = read_decoder(view, LLAMA)
    hidden, heads = reading.values["hidden_size"], reading.values["num_attention_heads"]
    blocks = view.raw.get("block_configs")
    field = view.field("block_configs")
    if not isinstance(blocks, list) or len(blocks) != reading.values["num_layers"]:
        raise InvalidArchitecture(
            f"{field} must list one block per layer ({reading.values['num_layers']})", field=field
        )
    groups: set[int] = set()
    widths: list[int] = []
    mixer_free = 0
    for i in range(len(blocks)):
        attention = _block_part(view, blocks, i, "attention")
        ffn = _block_part(view, blocks, i, "ffn")
        if attention.get("no_op"):
            mixer_free += 1
        else:
            group = attention.get("n_heads_in_group")
            if not isinstance(group, int) or group <= 0 or heads % group:
                where = f"{field}[{i}].attention.n_heads_in_group"
                raise InvalidArchitecture(f"{where} must divide {heads} heads", field=where)
            groups.add(group)
        if not ffn.get("no_op"):
            mult = ffn.get("ffn_mult")
            if not isinstance(mult, int | float) or isinstance(mult, bool) or mult <= 0:
                where = f"{field}[{i}].ffn.ffn_mult"
                raise InvalidArchitecture(f"{where} must be a positive number", field=where)
            widths.append(ffn_width(float(mult), hidden))
    if len(groups) > 1:
        raise UnsupportedArchitecture(
            f"{field}: attention layers with different KV-head counts "
            f"({sorted(heads // g for g in groups)}) are not priced yet",
            field=field,
        )
    if groups:
        reading.set("num_key_value_heads", heads // groups.pop(), "block_configs")
    if not widths:
        raise InvalidArchitecture(f"{field}: no block has an FFN", field=field)
    reading.set("num_mixer_free_layers", mixer_free, "block_configs")
    reading.set("num_mlp_free_layers", len(blocks) - len(widths), "block_configs")
    reading.set("intermediate_size", round(sum(widths) / len(widths)), "block_configs")
    view.defaulted.pop(view.field("intermediate_size"), None)  # the blocks state the widths
    if len(set(widths)) > 1:
        reading.notes.append(
            f"FFN widths differ per layer ({min(widths)}-{max(widths)}): priced at their mean"
        )
    return reading
