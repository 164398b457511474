"""llm-analysis's model configs (llm_analysis/model_configs/<org>_<name>.json: layers, heads,
widths and the model_type of each). Only the model types whose FFN width is the published one
are taken (OPT, GPT-Neo, GPT-J, BLOOM, GPT-2): the file gives 4 x hidden for every model, which
is wrong for the Llama ones. GPT-2's files carry no organisation (gpt2-xl.json): they are
OpenAI's checkpoints, now under openai-community; SantaCoder's (gpt2 in the file) is its own
multi-query remote-code model and is not taken."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from offline.catalog.packages import label
from offline.catalog.published import PublishedConfig

PACKAGE = "llm-analysis"
_FOLDER = "llm_analysis/model_configs"
_FFN_KEY = {"opt": "ffn_dim", "gpt_neo": "intermediate_size", "gptj": "n_inner", "bloom": None,
            "gpt2": "n_inner"}  # fmt: skip
_GPT2_ORG = "openai-community"
# DistilGPT2 (its file names no organisation; the Hub's canonical repo since the move of the
# organisation-less models, formerly `distilgpt2`) and the size its model card states
_DISTILGPT2 = ("distilbert", "distilgpt2")
_DISTILGPT2_SIZE = (82e6, "its model card: 6 layers, 768 dimension and 12 heads, totalizing 82M")
LLM_ANALYSIS_CHECK = (0.08, 0.0)  # its figures disagree with the name for whole models
DTYPE_NOTE = "llm-analysis records no dtype: fp16 assumed, the dtype these checkpoints ship in"
GPT2_DTYPE_NOTE = "llm-analysis records no dtype: fp16 assumed (GPT-2 served in half precision)"


def llm_analysis_configs(root: Path) -> Iterator[PublishedConfig]:
    """Each config of a model type in _FFN_KEY whose file name carries an organisation, and
    OpenAI's GPT-2 files and DistilGPT2's."""
    for path in sorted((root / _FOLDER).glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        model_type = document.get("model_type")
        if model_type not in _FFN_KEY or "hf-internal" in path.name or "tiny" in path.name:
            continue
        if "_" in path.stem:
            org, _, name = path.stem.partition("_")
            if model_type == "gpt2":
                continue  # bigcode_santacoder: multi-query attention, not GPT-2's
        elif path.stem.startswith("gpt2"):
            org, name = _GPT2_ORG, path.stem
        elif path.stem == _DISTILGPT2[1]:
            org, name = _DISTILGPT2
        else:
            continue
        config = {
            "model_type": model_type,
            # each model type's own names for the sizes (OPTConfig's, GPTNeoConfig's, ...)
            "num_hidden_layers": document["num_layers"], "n_layer": document["num_layers"],
            "num_layers": document["num_layers"], "num_heads": document["n_head"],
            "num_attention_heads": document["n_head"], "n_head": document["n_head"],
            "hidden_size": document["hidden_dim"], "n_embd": document["hidden_dim"],
            "vocab_size": document["vocab_size"], "torch_dtype": "float16",
        }  # fmt: skip
        if document.get("max_seq_len"):
            config["max_position_embeddings"] = document["max_seq_len"]
            config["n_positions"] = document["max_seq_len"]
        ffn_key = _FFN_KEY[model_type]
        if ffn_key is not None:
            config[ffn_key] = document["ffn_embed_dim"]
        source = (
            f"{label(PACKAGE)}: {_FOLDER}/{path.name} (its fields written as {model_type} "
            "config.json keys)"
        )
        yield PublishedConfig(
            f"{org}/{name}",
            config,
            source,
            False,
            (GPT2_DTYPE_NOTE if model_type == "gpt2" else DTYPE_NOTE,),
            name_check=LLM_ANALYSIS_CHECK,
            published_size=_DISTILGPT2_SIZE if name == _DISTILGPT2[1] else None,
        )
