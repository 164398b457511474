"""genz-llm's model configs (GenZ/Models/Model_sets/*.py: `ModelConfig(...)` calls, each under a
comment naming the Hugging Face config.json it was copied from). Read from the source text (the
calls' literal arguments), not imported: GenZ's package pulls in its simulator. The config.json
named in the comment gives the repo id; the model_type is the one that repo's family publishes
(MODEL_TYPES), and entries of no listed family (embedding models, hypothetical sizes, Grok-1) are
left out. genz records no dtype, biases or tied embeddings: the class defaults stand."""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from offline.catalog.packages import label
from offline.catalog.published import PublishedConfig

PACKAGE = "genz-llm"
_FOLDER = "GenZ/Models/Model_sets"
_URL = re.compile(r"https://huggingface\.co/([\w.-]+/[\w.-]+)")
# (repo id pattern, model_type), first match wins.
MODEL_TYPES = (
    (r"^Qwen/Qwen1\.5-MoE", "qwen2_moe"),
    (r"^Qwen/Qwen(1\.5|2)", "qwen2"),
    (r"^Qwen/Qwen-", "qwen"),  # Qwen-1's remote-code QWenConfig
    (r"^openai-community/gpt2", "gpt2"),
    (r"^microsoft/Phi-3\.5-MoE", "phimoe"),
    (r"^(mistralai/(Mistral|Ministral)|HuggingFaceH4/zephyr|nvidia/Mistral-NeMo)", "mistral"),
    (r"^mistralai/Mixtral", "mixtral"),
    (r"^nvidia/Nemotron-4", "nemotron"),
    (r"^ai21labs/", "jamba"),
    (r"^state-spaces/mamba", "mamba"),
    (r"^tiiuae/falcon-mamba", "falcon_mamba"),
    (r"^databricks/dbrx", "dbrx"),
    # ChatGLM's remote-code config, whose layers transformers' GlmConfig reads (glm-4-9b-chat-hf)
    (r"^THUDM/glm-4-9b-chat$", "glm"),
    (r"^deepseek-ai/deepseek-moe", "deepseek"),
    (r"^(meta-llama/|Secbone/llama-)", "llama"),
    (r"^facebook/opt-", "opt"),
)
_KEYS = {
    "hidden_size": "hidden_size", "num_decoder_layers": "num_hidden_layers",
    "num_attention_heads": "num_attention_heads", "num_key_value_heads": "num_key_value_heads",
    "head_dim": "head_dim", "intermediate_size": "intermediate_size", "vocab_size": "vocab_size",
    "max_model_len": "max_position_embeddings", "hidden_act": "hidden_act",
    "sliding_window": "sliding_window", "moe_intermediate_size": "moe_intermediate_size",
    "shared_expert_intermediate_size": "shared_expert_intermediate_size",
}  # fmt: skip
_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub,
    ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
}  # fmt: skip
# genz's Mamba fields, by the config.json key each model type names them with.
_MAMBA_KEYS = {
    "mamba_d_state": {"mamba": "state_size", "jamba": "mamba_d_state"},
    "mamba_d_conv": {"mamba": "conv_kernel", "jamba": "mamba_d_conv"},
    "mamba_expand": {"mamba": "expand", "jamba": "mamba_expand"},
    "mamba_dt_rank": {"mamba": "time_step_rank", "jamba": "mamba_dt_rank"},
}
_JAMBA_PERIODS = ("attn_layer_offset", "attn_layer_period", "expert_layer_offset",
                  "expert_layer_period")  # fmt: skip
GENZ_CHECK = (0.08, 0.0)  # its figures disagree with the name for whole models
DTYPE_NOTE = "genz-llm records no dtype: bf16 assumed, the dtype current checkpoints ship in"
# OPT checkpoints ship fp16 (as llm-analysis' OPT entries take them).
OPT_DTYPE_NOTE = "genz-llm records no dtype: fp16 assumed, the dtype OPT checkpoints ship in"


def _literal(node: ast.expr) -> Any:
    """A constant argument, or integer arithmetic on constants (`4*768`)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_literal(node.left), _literal(node.right))
    return ast.literal_eval(node)


def _calls(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(repo id from the comment just above, literal keyword arguments) of each ModelConfig."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ModelConfig"):
            continue
        above = lines[node.lineno - 2] if node.lineno >= 2 else ""
        found = _URL.search(above)
        if found is None:
            continue
        arguments = {}
        for keyword in node.keywords:
            try:
                arguments[str(keyword.arg)] = _literal(keyword.value)
            except ValueError:
                continue  # a non-literal argument (a quality-metrics object): not a size
        yield found.group(1), arguments


def hf_config(arguments: dict[str, Any], model_type: str) -> dict[str, Any]:
    """The config.json keys of `model_type` that carry genz's figures."""
    config: dict[str, Any] = {"model_type": model_type, "torch_dtype": "bfloat16"}
    config |= {hf: arguments[key] for key, hf in _KEYS.items() if arguments.get(key) is not None}
    family = "mamba" if model_type in ("mamba", "falcon_mamba") else model_type
    if family in ("mamba", "jamba"):
        config |= {names[family]: arguments[key] for key, names in _MAMBA_KEYS.items()
                   if arguments.get(key) is not None}  # fmt: skip
    if family == "mamba" and not config.get("intermediate_size"):
        # genz writes 0 (num_ffi=0: Mamba-1 has no MLP); MambaConfig's intermediate_size is
        # the mixer's inner width, expand x hidden when absent
        config.pop("intermediate_size", None)
    if family == "jamba":
        config |= {key: arguments[key] for key in _JAMBA_PERIODS if key in arguments}
    if model_type == "glm":
        # ChatGLM's config names no activation (genz writes "gelu"): GLM-4's MLP is SwiGLU,
        # GlmConfig's default
        config.pop("hidden_act", None)
    if model_type == "opt":
        config |= {"ffn_dim": config.pop("intermediate_size"), "torch_dtype": "float16",
                   "activation_function": config.pop("hidden_act", "relu")}  # fmt: skip
    experts = arguments.get("num_experts", 1)
    if model_type == "dbrx":
        return _dbrx_config(config, experts, arguments.get("expert_top_k", 1))
    if model_type == "deepseek":
        return _deepseek_config(config, experts, arguments)
    if experts > 1:
        config |= {"num_experts": experts, "num_local_experts": experts,
                   "num_experts_per_tok": arguments.get("expert_top_k", 1)}  # fmt: skip
    return config


def genz_configs(root: Path) -> Iterator[PublishedConfig]:
    """Every genz config under a config.json comment, of a family in MODEL_TYPES."""
    for path in sorted((root / _FOLDER).glob("*.py")):
        for repo_id, arguments in _calls(path):
            model_type = next((t for p, t in MODEL_TYPES if re.match(p, repo_id)), None)
            if model_type is None:
                continue
            source = (
                f"{label(PACKAGE)}: {_FOLDER}/{path.name} ModelConfig(model="
                f"{arguments.get('model')!r}) (its fields written as {model_type} config.json keys)"
            )
            config = hf_config(arguments, model_type)
            notes: tuple[str, ...] = (OPT_DTYPE_NOTE if model_type == "opt" else DTYPE_NOTE,)
            if model_type == "deepseek":
                notes += (DEEPSEEK_MOE_KV_HEADS_NOTE,)
            yield PublishedConfig(repo_id, config, source, False, notes, name_check=GENZ_CHECK)


def _dbrx_config(config: dict[str, Any], experts: int, top_k: int) -> dict[str, Any]:
    """genz's DBRX figures under DbrxConfig's own names: MosaicML's top-level sizes and the
    attn_config / ffn_config sub-configs (transformers' configuration_dbrx.py)."""
    return {
        "model_type": "dbrx", "torch_dtype": config["torch_dtype"],
        "d_model": config["hidden_size"], "n_heads": config["num_attention_heads"],
        "n_layers": config["num_hidden_layers"], "max_seq_len": config["max_position_embeddings"],
        "vocab_size": config["vocab_size"],
        "attn_config": {"kv_n_heads": config["num_key_value_heads"]},
        "ffn_config": {"ffn_hidden_size": config["intermediate_size"],
                       "moe_num_experts": experts, "moe_top_k": top_k,
                       "ffn_act_fn": {"name": config.get("hidden_act", "silu")}},
    }  # fmt: skip


# DeepSeekMoE 16B attends with 16 full heads (the DeepSeekMoE paper, arXiv:2401.06066, its
# 16B model settings: "the multi-head attention mechanism with a total of 16 attention heads");
# genz writes 2 KV heads, which would price an 8x smaller KV cache than the model keeps.
DEEPSEEK_MOE_KV_HEADS_NOTE = (
    "genz-llm gives 2 KV heads; DeepSeekMoE 16B is multi-head (arXiv:2401.06066): one KV head "
    "per attention head used"
)


def _deepseek_config(
    config: dict[str, Any], experts: int, arguments: dict[str, Any]
) -> dict[str, Any]:
    """genz's DeepSeek-MoE figures under DeepseekConfig's names (n_routed_experts,
    n_shared_experts, first_k_dense_replace), its per-expert shared width dropped for the
    class's n_shared_experts x moe_intermediate_size."""
    config = {k: v for k, v in config.items() if k != "shared_expert_intermediate_size"}
    config["num_key_value_heads"] = config["num_attention_heads"]
    config |= {"n_routed_experts": experts, "num_experts_per_tok": arguments["expert_top_k"],
               "n_shared_experts": arguments.get("n_shared_experts", 0),
               "first_k_dense_replace": arguments.get("first_k_dense_replace", 0),
               "moe_layer_freq": 1}  # fmt: skip
    return config
