"""llama-models' model SKUs (Meta's own package: llama_models/sku_list.py, one `Model` per
checkpoint with its Hugging Face repo, `arch_args` in Meta's field names, `max_seq_length` and
`quantization_format`), written as the config.json keys of the model type the checkpoint is.

Meta's FFN width is not stated but derived, as its FeedForward does (llama3/model.py):
int(2 x 4 x dim / 3), times ffn_dim_multiplier, rounded up to multiple_of. Meta's figures are
kept only where they give the architecture of a catalogued checkpoint of the same base
(`SIBLINGS`): llama-models 0.3.0 gives Llama 2 7B/13B eight KV heads and a 14336-wide FFN (their
config.json: 32/40 KV heads, 11008/13824) and Llama Guard 2 a 32000-token vocabulary (a Llama 3
8B: 128256). Checkpoints the catalogue holds under their transformers-format repo (`SAME_AS`) are
not added twice; int4/int8 SKUs are left out: their formats (group-256 int4 with 8-bit
embeddings, SpinQuant, QLoRA adapters) are not a quantization_config the reader takes."""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from offline.catalog.packages import label
from offline.catalog.published import PublishedConfig

PACKAGE = "llama-models"
_FILE = "llama_models/sku_list.py"
# llama-models' repo -> the catalogued repo of the same weights (Meta's own format of a
# transformers-format repo, or the name Meta's Hugging Face organisation gives the repo).
SAME_AS = {
    "meta-llama/Llama-2-7b": "meta-llama/Llama-2-7b-hf",
    "meta-llama/Llama-2-13b": "meta-llama/Llama-2-13b-hf",
    "meta-llama/Llama-2-70b": "meta-llama/Llama-2-70b-hf",
    "meta-llama/Llama-3-8B": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Llama-3-70B": "meta-llama/Meta-Llama-3-70B",
}
# llama-models' repo -> the repo id Meta's Hugging Face organisation publishes it under.
HUB_NAMES = {
    "meta-llama/Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3-8B-Instruct",
    "meta-llama/Llama-3-70B-Instruct": "meta-llama/Meta-Llama-3-70B-Instruct",
}
# A fine-tune or another precision -> the catalogued checkpoint of the same architecture.
SIBLINGS = {
    "meta-llama/Llama-2-7b-chat": "meta-llama/Llama-2-7b-hf",
    "meta-llama/Llama-2-13b-chat": "meta-llama/Llama-2-13b-hf",
    "meta-llama/Llama-2-70b-chat": "meta-llama/Llama-2-70b-hf",
    "meta-llama/Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Llama-3-70B-Instruct": "meta-llama/Meta-Llama-3-70B",
    "meta-llama/Llama-3.1-405B-FP8": "meta-llama/Llama-3.1-405B-Instruct-FP8",
    "meta-llama/Llama-Guard-3-8B": "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-Guard-2-8B": "meta-llama/Meta-Llama-3-8B",
}
# Meta's quantization_format -> the quantization_config transformers' checkpoint of it carries
# (Meta's FP8 405B: FBGEMM row-wise FP8); bf16 needs none; the others are left out.
QUANTIZATION = {"bf16": None, "fp8-mixed": {"quant_method": "fbgemm_fp8"}}
NAME_CHECK = (0.08, 0.0)
# The vision SKUs' names count the vision encoder and projector, which the text decoder's count
# leaves out (Llama 3.2 11B Vision: 10.6B on its model card, 9.8B of them the text decoder).
VISION_NAME_CHECK = (0.15, 0.0)
DTYPE_NOTE = "llama-models: weights as its quantization_format states (bf16, or fp8-mixed)"


def load_skus(root: Path) -> list[Any]:
    """llama-models' registered SKUs (sku_list.all_registered_models), imported from the
    unpacked wheel at `root` (sku_list and sku_types need only pydantic)."""
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module("llama_models.sku_list")
        return list(module.all_registered_models())
    finally:
        sys.path.remove(str(root))
        for name in [n for n in sys.modules if n.split(".")[0] == "llama_models"]:
            del sys.modules[name]


def ffn_width(args: dict[str, Any]) -> int:
    """Meta's FeedForward width for `arch_args` (llama3/model.py)."""
    hidden = int(2 * 4 * args["dim"] / 3)
    if args.get("ffn_dim_multiplier") is not None:
        hidden = int(args["ffn_dim_multiplier"] * hidden)
    multiple = int(args["multiple_of"])
    return multiple * ((hidden + multiple - 1) // multiple)


def hf_config(args: dict[str, Any], max_seq_length: int, vision: bool) -> dict[str, Any]:
    """LlamaConfig keys (MllamaConfig's text_config for the vision SKUs) of Meta's figures."""
    text = {
        "model_type": "mllama_text_model" if vision else "llama",
        "hidden_size": args["dim"],
        "num_hidden_layers": args["n_layers"],
        "num_attention_heads": args["n_heads"],
        "num_key_value_heads": args["n_kv_heads"],
        "intermediate_size": ffn_width(args),
        "vocab_size": args["vocab_size"],
        "max_position_embeddings": max_seq_length,
        "rope_theta": args["rope_theta"],
        "rms_norm_eps": args["norm_eps"],
        "tie_word_embeddings": False,  # Meta's Transformer has its own `output` projection
        "torch_dtype": "bfloat16",
    }
    if not vision:
        return text
    # as transformers' convert_mllama_weights_to_hf.py writes MllamaTextConfig: Meta's n_layers
    # are the self-attention layers; the cross-attention layers are added to num_hidden_layers,
    # every ceil(n_layers / count)-th index from the one before it
    count = args["vision_num_cross_attention_layers"]
    every = math.ceil(args["n_layers"] / count)
    text["num_hidden_layers"] = args["n_layers"] + count
    text["cross_attention_layers"] = list(range(args["n_layers"]))[every - 1 :: every]
    return {"model_type": "mllama", "text_config": text, "torch_dtype": "bfloat16"}


def llama_models_configs(root: Path) -> Iterator[PublishedConfig]:
    """Every SKU with a Hugging Face repo, figures and a format the reader takes; the others
    are yielded too, as `left_out` reasons (PublishedConfig.left_out)."""
    for sku in load_skus(root):
        repo = sku.huggingface_repo
        if not repo:
            continue
        fmt = sku.quantization_format.value
        source = f"{label(PACKAGE)}: {_FILE} {sku.descriptor()!r} (Meta's arch_args written as "
        if repo in SAME_AS:
            yield PublishedConfig.skipped(repo, f"the weights of {SAME_AS[repo]} in Meta's format")
        elif not sku.arch_args:
            yield PublishedConfig.skipped(repo, "llama-models gives no arch_args")
        elif fmt not in QUANTIZATION:
            yield PublishedConfig.skipped(
                repo, f"llama-models' {fmt} format is not a quantization_config the reader takes"
            )
        else:
            vision = "vision_num_cross_attention_layers" in sku.arch_args
            config = hf_config(sku.arch_args, sku.max_seq_length, vision)
            if QUANTIZATION[fmt] is not None:
                config["quantization_config"] = QUANTIZATION[fmt]
            source += f"{config['model_type']} config.json keys)"
            name = HUB_NAMES.get(repo, repo)
            aliases = (repo,) if name != repo else ()
            yield PublishedConfig(
                name, config, source, False, (DTYPE_NOTE,),
                VISION_NAME_CHECK if vision else NAME_CHECK,
                aliases=aliases, sibling=SIBLINGS.get(repo),
            )  # fmt: skip
