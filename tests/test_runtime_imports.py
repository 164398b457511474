"""The runtime package `service` never imports the offline tools (`offline`), and each of its
layers imports only the layers below it.

The Docker image carries `service/` only, so an import of `offline` anywhere under `service/`,
even one inside a function, would fail in production. Checked on the source with `ast` (every
Import and ImportFrom, wherever it sits), not by importing, so that lazy imports count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVICE = REPO / "service"
OFFLINE = "offline"


def offline_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) for each import of `offline` or a module under it in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            modules = [node.module]
        else:
            # relative imports resolve inside `service`, which holds no `offline` package
            continue
        found += [
            (node.lineno, module)
            for module in modules
            if module == OFFLINE or module.startswith(OFFLINE + ".")
        ]
    return found


def test_the_check_finds_offline_imports_wherever_they_sit() -> None:
    source = (
        "import offline.fitting\n"
        "def f():\n"
        "    from offline.training import train\n"
        "    import json, offline as o\n"
        "from offline_lookalike import x\n"
        "from .offline import y\n"
    )
    assert offline_imports(source) == [
        (1, "offline.fitting"),
        (3, "offline.training"),
        (4, "offline"),
    ]


def test_no_runtime_module_imports_offline() -> None:
    sources = sorted(SERVICE.rglob("*.py"))
    assert SERVICE / "main.py" in sources and len(sources) > 20  # the walk sees the runtime
    found = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in sources
        for line, module in offline_imports(path.read_text(encoding="utf-8"))
    ]
    assert not found, "service/ imports the offline tools:\n" + "\n".join(found)


# What each layer of `service/` may import from `service/` besides itself (README,
# "Architecture"): a layer imports only those below it.
BASE = {"config", "errors", "logs", "metrics", "schemas"}
LAYERS: dict[str, set[str]] = {
    "core": set(),
    "catalog": {"core"},
    "db": {"config"},
    "schemas": {"config"},
    "pricing": {"core", "catalog", "db", "errors", "schemas"},
    "quotes": {"core", "catalog", "db", "pricing"} | BASE,
    "api": {"core", "catalog", "db", "pricing", "quotes"} | BASE,
}


def service_imports(source: str) -> set[str]:
    """The top-level parts of `service` (`core`, `db`, `config`, ...) that `source` imports."""
    parts: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            modules = [node.module]
        else:
            continue
        parts |= {m.split(".")[1] for m in modules if m.startswith("service.")}
    return parts


def test_each_layer_imports_only_the_layers_below_it() -> None:
    broken = []
    for layer, allowed in LAYERS.items():
        sources = sorted((SERVICE / layer).rglob("*.py"))
        assert sources, layer
        for path in sources:
            above = service_imports(path.read_text(encoding="utf-8")) - allowed - {layer}
            if above:
                broken.append(f"{path.relative_to(REPO)} imports {sorted(above)} of service/")
    assert not broken, "a layer imports one above it:\n" + "\n".join(broken)


def test_the_layer_check_sees_an_import_from_above() -> None:
    assert service_imports("from service.quotes.service import QuoteService\n") == {"quotes"}
    assert service_imports("import service.api.deps\ndef f():\n    from service.db import x\n") == {
        "api",
        "db",
    }
