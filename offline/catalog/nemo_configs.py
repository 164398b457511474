"""NVIDIA NeMo's model configs (nemo-toolkit, `nemo/collections/llm/gpt/model/`), read from the
source text, never imported (the package pulls in torch and Megatron):

- the Hugging Face config.json files NeMo copies into `llama_nemotron_config.py`, each as a
  string under a comment naming the file (`# Config copy from https://huggingface.co/<repo>/
  blob/main/config.json`): verbatim;
- the Nemotron-H dataclasses of `ssm.py` (`NemotronHConfig8B`, `NemotronNano9Bv2`, ...), each
  paired with the repo its exporter loads for that class (`if type(source) == <class>:
  model_path = ... "<repo>"`), their Megatron fields written as NemotronHConfig keys;
- `gemma3.py`'s Gemma3Config1B, which the recipe `recipes/gemma3_1b.py` fine-tunes from
  google/gemma-3-1b-pt (RECIPE_REPOS), written as Gemma3TextConfig keys: `window_size`, the
  (local, global) `interleaved_attn_pattern` and `rotary_base`, tied embeddings as the class
  states; its GeLU as transformers' gelu_pytorch_tanh;
- the Qwen2-VL / Qwen2.5-VL dataclasses of `nemo/collections/vlm/qwen2vl/model/qwen2vl.py`,
  whose `language_transformer_config` is one of `qwen2.py`'s Qwen2 configs: Qwen2VLConfig2B
  with the repo its recipe `vlm/recipes/qwen2vl_2b.py` names, the Qwen2.5-VL ones with the repo
  `vlm/inference/base.py` loads for their projector's `hidden_size` (the text decoder's width);
  the decoder written flat, as Qwen2-VL's config.json has it (q/k/v biases, SwiGLU); NeMo's
  `seq_length` there is its training length (4096 for the 3B), not the checkpoint's context:
  left out, so the class default (32768) stands.

What the Nemotron-H dataclasses leave to Megatron-core's defaults, and how each is filled:
`kv_channels` unset is hidden / heads (TransformerConfig), `mamba_num_heads` unset is
expand x hidden / `mamba_head_dim` with MambaMixer's expand 2, the convolution is MambaMixer's
4 taps; the MLP is squared ReLU (`activation_func`: relu(x) ** 2) without biases
(`add_bias_linear` False), the embeddings untied (`share_embeddings_and_output_weights` False)
and the weights bf16 (`params_dtype`)."""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from offline.catalog.genz_configs import _OPERATORS
from offline.catalog.packages import label
from offline.catalog.published import PublishedConfig

PACKAGE = "nemo-toolkit"
_FOLDER = "nemo/collections/llm/gpt/model"
_COPIES = f"{_FOLDER}/llama_nemotron_config.py"
_SSM = f"{_FOLDER}/ssm.py"
_GEMMA3 = f"{_FOLDER}/gemma3.py"
_QWEN2 = f"{_FOLDER}/qwen2.py"
_QWEN_VL = "nemo/collections/vlm/qwen2vl/model/qwen2vl.py"
_VL_INFERENCE = "nemo/collections/vlm/inference/base.py"
_VL_RECIPES = {"Qwen2VLConfig2B": "nemo/collections/vlm/recipes/qwen2vl_2b.py"}
_LANGUAGE = re.compile(
    r"language_transformer_config: \w+ = field\(\s*default_factory=lambda: (\w+\([^)]*\))\s*\)"
)
_PROJECTOR = re.compile(r'projector_type="mcore_mlp", input_size=\d+, hidden_size=(\d+)')
_BY_WIDTH = re.compile(r'hidden_size == (\d+):\s*\n\s*model_id = "([\w.-]+/[\w.-]+)"')
_RECIPE_REPO = re.compile(r'HF_MODEL_NAME = "([\w.-]+/[\w.-]+)"')
# dataclass -> (the recipe that pairs it with a repo, the repo); the build checks the recipe
# names both
RECIPE_REPOS = {"Gemma3Config1B": ("nemo/collections/llm/recipes/gemma3_1b.py",
                                   "google/gemma-3-1b-pt")}  # fmt: skip
_COPY = re.compile(
    r"# Config copy from https://huggingface\.co/([\w.-]+/[\w.-]+)/blob/main/config\.json\n"
    r"(\w+) = \"\"\"(.*?)\"\"\"",
    re.DOTALL,
)
# the exporter's choice of repo per dataclass (NemotronH's HF exporter `config` property)
_EXPORTED = re.compile(
    r"type\(source\) == (\w+):\s*\n\s*model_path = [^\n]*?else \"([\w.-]+/[\w.-]+)\""
)
# Megatron-core defaults the dataclasses rely on (see the module docstring)
MAMBA_EXPAND = 2
MAMBA_CONV_KERNEL = 4
# Names give the size within 8 %, as for genz-llm; a dense hybrid states no active size.
NAME_CHECK = (0.08, 0.0)
# a VL name counts its vision encoder too (0.4-0.7B), the text decoder alone is counted: 15 %,
# as llama-models' vision SKUs
VL_NAME_CHECK = (0.15, 0.0)
DTYPE_NOTE = "nemo-toolkit records no checkpoint dtype: bf16 assumed (its configs' training dtype)"


_ARITHMETIC = {**_OPERATORS, ast.Div: operator.truediv}


def _value(node: ast.expr) -> Any:
    """A literal, or arithmetic on literals (`16384 / 5120`)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_value(node.left), _value(node.right))
    return ast.literal_eval(node)


def config_copies(root: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(repo id, variable name, config.json) for each copy in llama_nemotron_config.py."""
    text = (root / _COPIES).read_text(encoding="utf-8")
    for repo_id, name, body in _COPY.findall(text):
        yield repo_id, name, json.loads(body)


def dataclass_fields(path: Path) -> dict[str, dict[str, Any]]:
    """Each class of `path` -> its literal field defaults (arithmetic on literals evaluated),
    those of its bases in the same file first (a subclass's own fields win); fields whose
    default is not a literal are left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own: dict[str, dict[str, Any]] = {}
    bases: dict[str, list[str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
        fields: dict[str, Any] = {}
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                try:
                    fields[item.target.id] = _value(item.value) if item.value else None
                except ValueError:
                    continue
        own[node.name] = fields

    def resolved(name: str) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for base in bases.get(name, []):
            if base in own:
                merged |= resolved(base)
        return merged | own[name]

    return {name: resolved(name) for name in own}


def exported_repos(path: Path) -> dict[str, str]:
    """Dataclass name -> the Hugging Face repo NeMo's exporter pairs it with."""
    return dict(_EXPORTED.findall(path.read_text(encoding="utf-8")))


def nemotron_h_config(f: dict[str, Any]) -> dict[str, Any]:
    """A Nemotron-H dataclass's fields as the NemotronHConfig config.json keys."""
    hidden, heads = f["hidden_size"], f["num_attention_heads"]
    mamba_head_dim = f["mamba_head_dim"]
    return {
        "model_type": "nemotron_h",
        "hybrid_override_pattern": f["hybrid_override_pattern"],
        "num_hidden_layers": f["num_layers"],
        "hidden_size": hidden,
        "intermediate_size": f["ffn_hidden_size"],
        "num_attention_heads": heads,
        "num_key_value_heads": f["num_query_groups"],
        "head_dim": f.get("kv_channels") or hidden // heads,
        "vocab_size": f["vocab_size"],
        "max_position_embeddings": f["seq_length"],
        "mamba_num_heads": f.get("mamba_num_heads") or MAMBA_EXPAND * hidden // mamba_head_dim,
        "mamba_head_dim": mamba_head_dim,
        "n_groups": f["mamba_num_groups"],
        "ssm_state_size": f["mamba_state_dim"],
        "conv_kernel": MAMBA_CONV_KERNEL,
        "expand": MAMBA_EXPAND,
        "mlp_hidden_act": "relu2",
        "mlp_bias": f["add_bias_linear"],
        "use_bias": f["add_bias_linear"],
        "layer_norm_epsilon": f["layernorm_epsilon"],
        "tie_word_embeddings": f["share_embeddings_and_output_weights"],
        "torch_dtype": "bfloat16",
    }


def gemma3_config(f: dict[str, Any]) -> dict[str, Any]:
    """A Gemma 3 dataclass's fields as the Gemma3TextConfig config.json keys."""
    local, global_ = f["interleaved_attn_pattern"]
    rope_local, rope_global = f["rotary_base"]
    return {
        "model_type": "gemma3_text",
        "num_hidden_layers": f["num_layers"],
        "hidden_size": f["hidden_size"],
        "intermediate_size": f["ffn_hidden_size"],
        "num_attention_heads": f["num_attention_heads"],
        "num_key_value_heads": f["num_query_groups"],
        "head_dim": f["kv_channels"],
        "vocab_size": f["vocab_size"],
        "max_position_embeddings": f["seq_length"],
        "sliding_window": f["window_size"],
        "sliding_window_pattern": local + global_,
        "rope_theta": rope_global,
        "rope_local_base_freq": rope_local,
        "rms_norm_eps": f["layernorm_epsilon"],
        "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": f["share_embeddings_and_output_weights"],
        "torch_dtype": "bfloat16",
    }


def recipe_configs(root: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(repo id, dataclass, Gemma3TextConfig keys) for each RECIPE_REPOS entry, whose recipe
    must name both the dataclass and the repo."""
    fields = dataclass_fields(root / _GEMMA3)
    for name, (recipe, repo_id) in RECIPE_REPOS.items():
        text = (root / recipe).read_text(encoding="utf-8")
        if name not in text or f'"{repo_id}"' not in text:
            raise ValueError(f"{recipe} no longer pairs {name} with {repo_id}")
        yield repo_id, name, gemma3_config(fields[name])


def qwen2_vl_config(f: dict[str, Any], model_type: str) -> dict[str, Any]:
    """A NeMo Qwen2 config's fields as a Qwen2-VL config.json's (flat) text keys."""
    return {
        "model_type": model_type,
        "num_hidden_layers": f["num_layers"],
        "hidden_size": f["hidden_size"],
        "intermediate_size": f["ffn_hidden_size"],
        "num_attention_heads": f["num_attention_heads"],
        "num_key_value_heads": f["num_query_groups"],
        "vocab_size": f["vocab_size"],
        "rms_norm_eps": f["layernorm_epsilon"],
        "rope_theta": f["rotary_base"],
        "hidden_act": "silu",
        "tie_word_embeddings": f["share_embeddings_and_output_weights"],
        "torch_dtype": "bfloat16",
    }


def qwen_vl_configs(root: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(repo id, dataclass, config.json) of each Qwen VL dataclass a recipe or the inference
    module pairs with a repo."""
    text_fields = dataclass_fields(root / _QWEN2)
    by_width = dict(_BY_WIDTH.findall((root / _VL_INFERENCE).read_text(encoding="utf-8")))
    tree = ast.parse((root / _QWEN_VL).read_text(encoding="utf-8"))
    source = (root / _QWEN_VL).read_text(encoding="utf-8")
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or not node.name.startswith("Qwen2"):
            continue
        body = ast.get_source_segment(source, node) or ""
        language, projector = _LANGUAGE.search(body), _PROJECTOR.search(body)
        if language is None:
            continue
        repo_id = by_width.get(projector.group(1)) if projector else None
        if node.name in _VL_RECIPES:
            found = _RECIPE_REPO.search((root / _VL_RECIPES[node.name]).read_text("utf-8"))
            repo_id = found.group(1) if found else None
        if repo_id is None:
            continue
        call = ast.parse(language.group(1), mode="eval").body
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
        overrides = {str(k.arg): _value(k.value) for k in call.keywords}
        fields = text_fields[call.func.id] | overrides
        model_type = "qwen2_5_vl" if node.name.startswith("Qwen25") else "qwen2_vl"
        yield repo_id, f"{node.name} ({language.group(1)})", qwen2_vl_config(fields, model_type)


def nemo_configs(root: Path, siblings: dict[str, str] | None = None) -> Iterator[PublishedConfig]:
    """The config.json copies, then the Nemotron-H dataclasses in the exporter's order.
    `siblings` maps a repo to a catalogued checkpoint of the same architecture (a base model's
    post-trained release), whose shape its figures must give."""
    for repo_id, name, config in config_copies(root):
        source = f"{label(PACKAGE)}: {_COPIES} {name} (config.json verbatim, the comment names it)"
        yield PublishedConfig(repo_id, config, source, verbatim=True)
    fields = dataclass_fields(root / _SSM)
    for name, repo_id in exported_repos(root / _SSM).items():
        source = (
            f"{label(PACKAGE)}: {_SSM} {name} (its exporter's repo; Megatron fields written as "
            "nemotron_h config.json keys)"
        )
        yield PublishedConfig(
            repo_id, nemotron_h_config(fields[name]), source, False, (DTYPE_NOTE,), NAME_CHECK,
            sibling=(siblings or {}).get(repo_id),
        )  # fmt: skip
    for repo_id, name, config in recipe_configs(root):
        source = (
            f"{label(PACKAGE)}: {_GEMMA3} {name} (the repo {RECIPE_REPOS[name][0]} fine-tunes; "
            "Megatron fields written as gemma3_text config.json keys)"
        )
        yield PublishedConfig(
            repo_id, config, source, False, (DTYPE_NOTE,), NAME_CHECK,
            sibling=(siblings or {}).get(repo_id),
        )  # fmt: skip
    for repo_id, name, config in qwen_vl_configs(root):
        source = (
            f"{label(PACKAGE)}: {_QWEN_VL} {name}, {_QWEN2} (Megatron fields written as "
            f"{config['model_type']} config.json keys)"
        )
        yield PublishedConfig(repo_id, config, source, False, (DTYPE_NOTE,), VL_NAME_CHECK)


# The post-trained releases of the bases NeMo names, catalogued: their shape is the base's.
SIBLINGS = {
    "nvidia/NVIDIA-Nemotron-Nano-9B-v2-Base": "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
    "nvidia/NVIDIA-Nemotron-Nano-12B-v2-Base": "nvidia/NVIDIA-Nemotron-Nano-12B-v2",
    "google/gemma-3-1b-pt": "google/gemma-3-1b-it",
}
