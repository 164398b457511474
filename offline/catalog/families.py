"""A repo id's family (the lab's model line) and series (the release within it), by name."""

from __future__ import annotations

import re

# First match wins: a derivative named after its base (nvidia/Llama-3_3-Nemotron-...) belongs
# to the line its own name leads with.
_FAMILIES = (
    ("nemotron", r"nemotron|minitron"),
    ("llama", r"llama|llava|vicuna"),
    ("qwen", r"qwen|qwq"),
    ("deepseek", r"deepseek"),
    ("gemma", r"gemma"),
    ("mistral", r"mistral|mixtral|ministral|codestral|magistral|devstral|mathstral"),
    ("phi", r"^phi"),
    ("gpt-oss", r"gpt-oss"),
    ("kimi", r"kimi"),
    ("glm", r"glm|codegeex"),
    ("minimax", r"minimax"),
    ("falcon", r"falcon"),
    ("pythia", r"pythia"),
    ("olmo", r"olmo"),
    ("smollm", r"smollm"),
    ("granite", r"granite"),
    ("jamba", r"jamba"),
    ("cohere", r"command|c4ai|aya"),
    ("bloom", r"bloom"),
    ("stablelm", r"stablelm|stable-?code"),
    ("mimo", r"mimo"),
    ("step", r"^step"),
    ("opt", r"^opt-"),
    ("gpt-neo", r"^gpt-neo"),
    ("mamba", r"mamba"),
)
_SIZE = re.compile(r"^(\d+(\.\d+)?[bmk]|\d+x\d+(\.\d+)?b|a\d+(\.\d+)?b|\d+e)$")


def family_of(repo_id: str) -> str:
    """The model line `repo_id` belongs to (lower case), else its organisation's name."""
    org, _, name = repo_id.lower().partition("/")
    for family, pattern in _FAMILIES:
        if re.search(pattern, name):
            return family
    return org.replace("_", "-")


def series_of(repo_id: str) -> str:
    """The release within the family: the name up to its first size token
    (gemma-2-9b-it -> gemma-2, Qwen3-30B-A3B -> qwen3, Mixtral-8x7B -> mixtral)."""
    name = re.sub(r"(\d)_(\d)", r"\1.\2", repo_id.split("/")[-1].lower())  # Qwen-1_8B: 1.8B
    tokens = name.replace("_", "-").split("-")
    kept: list[str] = []
    for token in tokens:
        if _SIZE.match(token):
            break
        kept.append(token)
    return "-".join(kept) or tokens[0]
