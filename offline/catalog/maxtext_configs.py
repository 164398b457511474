"""Google's MaxText ships the Hugging Face config.json of the models its checkpoint converter
writes (`maxtext/checkpoint_conversion/utils/hf_model_configs.py`: module-level dicts, several
under a comment naming the config.json they copy), the maxtext model each converts
(`HF_MODEL_CONFIGS`) and that model's Hugging Face repo (`HF_IDS` in
`maxtext/utils/globals.py`). Read from the source text (no import: the module imports
transformers). Taken: a model whose converter config is one of those dicts (the configs built
by config-class calls from keyword arguments are not the published file); left out: a dict
whose comment names another repo's config.json than HF_IDS gives, says its
quantization_config was removed (the repo's own file has it) or that it is shared by several
checkpoints (an edited file), a repo whose name states a quantisation its dict lacks, and Gemma
4's E2B/E4B (per-layer embeddings: neither priced nor counted)."""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from offline.catalog.packages import label
from offline.catalog.published import PublishedConfig

PACKAGE = "maxtext"
CONFIGS = "maxtext/checkpoint_conversion/utils/hf_model_configs.py"
IDS = "maxtext/utils/globals.py"
_FROM = re.compile(r"#\s*from https://huggingface\.co/([\w.-]+/[\w.-]+)/blob/main/config\.json")
_QUANTISED = re.compile(r"-(FP8|NVFP4|AWQ|GPTQ|Int4|Int8|bnb)", re.IGNORECASE)
_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {ast.Mult: operator.mul, ast.Add: operator.add}


def maxtext_configs(root: Path) -> Iterator[PublishedConfig]:
    """The converter's config.json dicts of the models HF_IDS names, in HF_IDS order."""
    text = (root / CONFIGS).read_text(encoding="utf-8")
    dicts, comments = _module_dicts(text)
    converters = _name_map(text, "HF_MODEL_CONFIGS")
    seen: set[str] = set()
    for model, repo_id in _hf_ids((root / IDS).read_text(encoding="utf-8")).items():
        variable = converters.get(model, "").removesuffix("_config") + "_dict"
        if variable not in dicts or repo_id.lower() in seen:
            continue
        seen.add(repo_id.lower())
        why = _left_out(repo_id, dicts[variable], comments.get(variable, ""))
        if why is not None:
            yield PublishedConfig.skipped(repo_id, f"{label(PACKAGE)}'s {variable}: {why}")
            continue
        source = f"{label(PACKAGE)}: {CONFIGS} {variable} (config.json as the converter writes it)"
        yield PublishedConfig(
            repo_id, dicts[variable], source, verbatim=True, name_check=(0.08, 1e9)
        )


def _left_out(repo_id: str, config: dict[str, Any], comment: str) -> str | None:
    """Why the converter's dict is not `repo_id`'s published config.json, or None."""
    named = _FROM.search(comment)
    if named and named.group(1).lower() != repo_id.lower():
        return f"{named.group(1)}'s config.json"
    if "quantization_config" in comment:
        return "its quantization_config removed"
    if "shared by" in comment:
        return "one edited config shared by several checkpoints"
    if _QUANTISED.search(repo_id) and "quantization_config" not in config:
        return "no quantization_config for a quantised checkpoint"
    text = config.get("text_config") or {}
    if text.get("hidden_size_per_layer_input"):
        return "Gemma 4 per-layer embeddings (E2B/E4B), neither priced nor counted"
    return None


def _hf_ids(text: str) -> dict[str, str]:
    """HF_IDS: maxtext model name -> Hugging Face repo (entries that name a repo)."""
    return {k: v for k, v in _string_dict(text, "HF_IDS", IDS).items() if "/" in v}


def _name_map(text: str, name: str) -> dict[str, str]:
    """A module-level {str: variable} dict (HF_MODEL_CONFIGS): key -> variable name."""
    return _string_dict(text, name, CONFIGS)


def _string_dict(text: str, name: str, where: str) -> dict[str, str]:
    """The module-level dict `name`: its string keys -> string values or variable names."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and _target(node) == name:
            if not isinstance(node.value, ast.Dict):
                break
            found = {}
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    if isinstance(value, ast.Name):
                        found[key.value] = value.id
                    elif isinstance(value, ast.Constant) and isinstance(value.value, str):
                        found[key.value] = value.value
            return found
    raise ValueError(f"{where}: no {name}")


def _module_dicts(text: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The module's `*_dict` variables as its top-level statements leave them (literals,
    `other.copy()`, `{**other, ...}`, `x["k"] = ...`, `x[...].update({...})`), and the comment
    lines right above each assignment."""
    lines = text.splitlines()
    values: dict[str, Any] = {}
    comments: dict[str, str] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and (name := _target(node)).endswith("_dict"):
            values[name] = _evaluate(node.value, values)
            above = []
            for line in reversed(lines[: node.lineno - 1]):
                if not line.startswith("#"):
                    break
                above.append(line)
            comments[name] = "\n".join(reversed(above))
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            target = _evaluate(node.targets[0].value, values)
            target[_evaluate(node.targets[0].slice, values)] = _evaluate(node.value, values)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Attribute) and call.func.attr == "update":
                _evaluate(call.func.value, values).update(_evaluate(call.args[0], values))
    return {k: v for k, v in values.items() if isinstance(v, dict)}, comments


def _evaluate(node: ast.expr, names: dict[str, Any]) -> Any:
    """A literal expression, with names of earlier dicts, subscripts, `.copy()`, `**` spreads
    and `*`/`+` between literals."""
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.Subscript):
        return _evaluate(node.value, names)[_evaluate(node.slice, names)]
    copy = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    if copy and node.func.attr == "copy" and not node.args:  # type: ignore[attr-defined]
        return dict(_evaluate(node.func.value, names))  # type: ignore[attr-defined]
    if isinstance(node, ast.Dict):
        result: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                result.update(_evaluate(value, names))
            else:
                result[_evaluate(key, names)] = _evaluate(value, names)
        return result
    if isinstance(node, ast.List):
        return [_evaluate(e, names) for e in node.elts]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left, names), _evaluate(node.right, names)
        return _OPERATORS[type(node.op)](left, right)
    return ast.literal_eval(node)


def _target(node: ast.Assign | ast.AnnAssign) -> str:
    target = node.targets[0] if isinstance(node, ast.Assign) else node.target
    return target.id if isinstance(target, ast.Name) else ""
