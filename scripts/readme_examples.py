"""Refresh the README's and docs/api.md's endpoint examples from a real running service.

    python scripts/readme_examples.py            # rewrite the marked example blocks
    python scripts/readme_examples.py --check    # print them, leave the files alone

Starts `uvicorn service.main:app` in a fresh temporary directory (SQLite under `./var/`),
creates an API key there (examples marked `open_mode` run first, on a service without any
key), runs every example's `curl` command against it, and replaces each block between
`<!-- example:NAME -->` and `<!-- /example -->` in README.md and docs/api.md (`DOCUMENTS`) with
the command and what the service answered. Every example has exactly one block, in one of those
files; the examples still run in the order of `readme_scenario.EXAMPLES` wherever their blocks
are, since later ones use ids that earlier ones answered. Long answers are shortened by
`readme_render.render_answer` (lists cut to their first items, long strings cut), never edited
by hand.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from readme_render import render_answer
from readme_scenario import EXAMPLES, Example

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
# The files whose marked blocks are filled: the README's short tour and the API reference.
DOCUMENTS = (README, REPO / "docs" / "api.md")
BLOCK = re.compile(r"(<!-- example:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /example -->)", re.S)
STARTUP_TIMEOUT_S = 60.0


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def create_key(workdir: Path, environment: dict[str, str]) -> str:
    """A key for tenant acme with every scope, created by the project's CLI in `workdir`."""
    created = subprocess.run(
        [sys.executable, "-m", "service", "keys", "create", "--tenant", "acme",
         "--scopes", "estimate,billing,observe,admin"],
        cwd=workdir, env=environment, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return created.stdout.strip().splitlines()[-1]


@contextmanager
def running_service(workdir: Path, port: int, environment: dict[str, str]) -> Iterator[str]:
    """`uvicorn service.main:app` on `port`, with `workdir` as its working directory."""
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "service.main:app", "--port", str(port)],
        cwd=workdir, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                if httpx.get(f"{base_url}/v1/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the service did not start")
            time.sleep(0.2)
        yield base_url
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_example(example: Example, port: int, key: str, found: dict[str, str]) -> str:
    """The example's command and answer as README Markdown; records ids it answered."""
    time.sleep(example.wait_s)
    shown = example.command
    for name, value in found.items():
        shown = shown.replace("{" + name + "}", value)
    executed = re.sub(r"localhost:8\d{3}", f"localhost:{port}", shown)
    answer = subprocess.run(
        ["bash", "-c", executed], env={**os.environ, "KEY": key},
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    for name, pattern in example.captures.items():
        match = re.search(pattern, answer)
        if match is None:
            raise RuntimeError(f"example {example.name}: nothing matched {pattern!r}")
        found[name] = match.group(1)
    rendered = render_answer(answer, example.keep_headers, example.keep_lines, example.elide)
    language = "http" if example.keep_headers else ("text" if example.keep_lines else "json")
    return f"```bash\n{shown}\n```\n\n```{language}\n{rendered}\n```\n"


def block_names(text: str) -> list[str]:
    """The names of the example blocks marked in `text`, in order."""
    return [m.group("name") for m in BLOCK.finditer(text)]


def replace_blocks(text: str, blocks: dict[str, str]) -> str:
    """`text` with every marked example block it holds replaced by its fresh text."""
    return BLOCK.sub(lambda m: m.group(1) + blocks[m.group("name")] + m.group(4), text)


def rewrite_documents(texts: dict[Path, str], blocks: dict[str, str]) -> dict[Path, str]:
    """Each document's text with its blocks filled. Every example must have exactly one block
    across the documents, and every block an example."""
    placed = [(name, path) for path, text in texts.items() for name in block_names(text)]
    names = [name for name, _ in placed]
    missing = set(blocks) - set(names)
    if missing:
        raise RuntimeError(f"no block in {[str(p) for p in texts]} for: {sorted(missing)}")
    unknown = set(names) - set(blocks)
    if unknown:
        raise RuntimeError(f"blocks without an example: {sorted(unknown)}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise RuntimeError(f"blocks marked more than once: {repeated}")
    return {path: replace_blocks(text, blocks) for path, text in texts.items()}


def capture_blocks() -> dict[str, str]:
    """Run every example against a fresh service; the Markdown of each, by name. Examples
    marked `open_mode` run first, against a service of their own with no key at all."""
    blocks: dict[str, str] = {}
    for open_mode in (True, False):
        examples = [e for e in EXAMPLES if e.open_mode is open_mode]
        with tempfile.TemporaryDirectory(prefix="readme-examples-") as tmp:
            workdir = Path(tmp)
            environment = {**os.environ, "PYTHONPATH": str(REPO)}
            environment.pop("QUOTES_DATABASE_URL", None)
            environment.pop("DATABASE_URL", None)
            key = "" if open_mode else create_key(workdir, environment)
            port = free_port()
            found: dict[str, str] = {}
            with running_service(workdir, port, environment):
                blocks.update({e.name: run_example(e, port, key, found) for e in examples})
    return blocks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print, do not write the files")
    args = parser.parse_args()
    blocks = capture_blocks()
    if args.check:
        for name, text in blocks.items():
            print(f"<!-- example:{name} -->\n{text}")
        return 0
    texts = {path: path.read_text(encoding="utf-8") for path in DOCUMENTS}
    for path, text in rewrite_documents(texts, blocks).items():
        path.write_text(text, encoding="utf-8")
    print(
        f"rewrote {len(blocks)} example blocks in "
        f"{', '.join(str(p.relative_to(REPO)) for p in DOCUMENTS)}: {shlex.join(list(blocks))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
