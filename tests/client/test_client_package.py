"""The client package stands alone: it imports neither the service nor the offline tools (it is
installed where they are not), and its third-party imports are the ones its pyproject declares.
Checked on the source with `ast`, lazy imports included."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "client"
PACKAGE = CLIENT / "src" / "llm_energy_quotes_client"


def top_level_imports(source: str) -> set[str]:
    """The top-level packages `source` imports (absolute imports only)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            found.add(node.module.split(".")[0])
    return found


def test_the_client_imports_only_itself_the_standard_library_and_its_dependencies() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    declared = {"httpx", "pydantic"}
    assert {d.split(">")[0].split("[")[0] for d in project["dependencies"]} == declared
    assert [d.split(">")[0] for d in project["optional-dependencies"]["litellm"]] == ["litellm"]
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) >= 14
    unexpected = {}
    for path in sources:
        allowed = declared | {"llm_energy_quotes_client", "__future__"}
        if path.name == "litellm.py":
            allowed.add("litellm")  # the optional extra, imported by this module alone
        imports = top_level_imports(path.read_text(encoding="utf-8"))
        outside = {m for m in imports - allowed if m not in sys.stdlib_module_names}
        if outside:
            unexpected[str(path.relative_to(REPO))] = sorted(outside)
    assert not unexpected, f"client modules import outside the package: {unexpected}"


def test_the_check_sees_service_and_lazy_imports() -> None:
    source = "import json\ndef f():\n    from service.api import deps\nfrom . import calls\n"
    assert top_level_imports(source) == {"json", "service"}
