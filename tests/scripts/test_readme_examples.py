"""The example generator fills blocks in README.md and docs/api.md, each example exactly once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from readme_examples import DOCUMENTS, block_names, rewrite_documents
from readme_scenario import EXAMPLES

BLOCKS = {"a": "new a\n", "b": "new b\n"}


def _marked(*names: str) -> str:
    return "".join(f"text\n<!-- example:{name} -->\nold\n<!-- /example -->\n" for name in names)


def test_blocks_spread_over_two_documents_are_all_filled() -> None:
    texts = {Path("README.md"): _marked("a"), Path("docs/api.md"): _marked("b")}
    rewritten = rewrite_documents(texts, BLOCKS)
    assert rewritten[Path("README.md")] == "text\n<!-- example:a -->\nnew a\n<!-- /example -->\n"
    assert rewritten[Path("docs/api.md")] == "text\n<!-- example:b -->\nnew b\n<!-- /example -->\n"


@pytest.mark.parametrize(
    ("readme", "api", "message"),
    [
        (_marked("a"), "", "no block"),
        (_marked("a", "b", "c"), "", "without an example"),
        (_marked("a", "b"), _marked("b"), "more than once"),
    ],
)
def test_missing_unknown_or_repeated_blocks_are_refused(
    readme: str, api: str, message: str
) -> None:
    with pytest.raises(RuntimeError, match=message):
        rewrite_documents({Path("README.md"): readme, Path("docs/api.md"): api}, BLOCKS)


def test_the_repository_documents_mark_every_example_exactly_once() -> None:
    names = [name for path in DOCUMENTS for name in block_names(path.read_text(encoding="utf-8"))]
    assert sorted(names) == sorted(example.name for example in EXAMPLES)
