"""IBM's foundation-model-stack (ibm-fms) model configs, read from the source text, never
imported (the package pulls in torch): the `*Config` dataclasses of `fms/models/*.py` whose
docstring names the Hugging Face checkpoint they are the defaults of. Only Ministral 3 does
(`Ministral3Config`: "The current defaults correspond to ... https://huggingface.co/mistralai/
Ministral-3-14B-Reasoning-2512"); fms's other registered variants ("8b", "3_1_2b", "9_8b")
name no repo and are not taken.

Its text decoder (`Ministral3TextConfig`) is written as a Mistral 3 config.json whose
`text_config` holds Ministral3Config keys: the FFN width as fms's GatedLinearUnit builds it
(int(hidden_grow_factor x emb_dim), rounded up to multiple_of); untied (`tie_heads` False).
fms records no dtype: bf16 assumed (the checkpoint's own). The Pixtral vision encoder is not
priced, as for every multimodal entry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from offline.catalog.nemo_configs import dataclass_fields
from offline.catalog.packages import label
from offline.catalog.published import PublishedConfig

PACKAGE = "ibm-fms"
_MINISTRAL3 = "fms/models/ministral3.py"
REPO = "mistralai/Ministral-3-14B-Reasoning-2512"
# the text decoder is held to the name within 8 % (the name counts the vision encoder too)
NAME_CHECK = (0.08, 0.0)
DTYPE_NOTE = "ibm-fms records no dtype: bf16 assumed"


def ffn_width(fields: dict[str, Any]) -> int:
    """fms's GatedLinearUnit hidden_dim: int(hidden_grow_factor x emb_dim), rounded up to
    multiple_of."""
    width = int(fields["hidden_grow_factor"] * fields["emb_dim"])
    step = fields.get("multiple_of") or 1
    return int(step * ((width + step - 1) // step))


def ministral3_config(text: dict[str, Any]) -> dict[str, Any]:
    """Ministral3TextConfig's fields as a Mistral 3 config.json (the text decoder's keys)."""
    return {
        "model_type": "mistral3",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "ministral3",
            "hidden_size": text["emb_dim"],
            "num_hidden_layers": text["nlayers"],
            "num_attention_heads": text["nheads"],
            "num_key_value_heads": text["kvheads"],
            "head_dim": text["head_dim"],
            "intermediate_size": ffn_width(text),
            "vocab_size": text["src_vocab_size"],
            "max_position_embeddings": text["max_expected_seq_len"],
            "rms_norm_eps": text["norm_eps"],
            "hidden_act": text["activation_fn"],
            "sliding_window": text["sliding_window"],
            "tie_word_embeddings": text["tie_heads"],
            "torch_dtype": "bfloat16",
        },
    }


def fms_configs(root: Path) -> Iterator[PublishedConfig]:
    """Ministral 3 14B Reasoning, where Ministral3Config's docstring still names it."""
    path = root / _MINISTRAL3
    if f"https://huggingface.co/{REPO}" not in path.read_text(encoding="utf-8"):
        return
    fields = dataclass_fields(path)
    source = (
        f"{label(PACKAGE)}: {_MINISTRAL3} Ministral3TextConfig (the defaults Ministral3Config's "
        "docstring names the repo of; fms's fields written as ministral3 config.json keys)"
    )
    config = ministral3_config(fields["Ministral3TextConfig"])
    yield PublishedConfig(REPO, config, source, False, (DTYPE_NOTE,), NAME_CHECK)
