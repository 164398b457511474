"""The PyPI packages whose published model configs the catalogue is built from, pinned, fetched
with pip into a temporary folder at build time (never by the service)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

# name -> version: a new version is a deliberate change of the catalogue's inputs.
PINNED = {
    "aiconfigurator-core": "0.12.0",
    "litgpt": "0.5.13",
    "genz-llm": "0.0.16",
    "ibm-fms": "1.13.1",
    "llm-analysis": "0.2.2",
    "llama-models": "0.3.0",
    "maxtext": "0.2.5",
    "nemo-toolkit": "2.7.3",
}
# Packages whose wheels declare a newer Python than the build's: fetched as for that Python (no
# dependencies, nothing run; only their files are read).
PYTHON_VERSION = {"maxtext": "3.12"}


def unpacked_packages(workdir: Path) -> dict[str, Path]:
    """Each pinned package's wheel, downloaded (no dependencies) and unpacked under `workdir`;
    a package already unpacked there is reused."""
    found: dict[str, Path] = {}
    for name, version in sorted(PINNED.items()):
        target = workdir / f"{name}-{version}"
        if not target.is_dir():
            wheels = workdir / "wheels" / name
            python = ["--python-version", PYTHON_VERSION[name]] if name in PYTHON_VERSION else []
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                 "--only-binary", ":all:", *python, f"{name}=={version}", "-d", str(wheels)],
                check=True,
            )  # fmt: skip
            (wheel,) = sorted(wheels.glob("*.whl"))
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(target)
        found[name] = target
    return found


def label(name: str) -> str:
    """`name version`, as the sources quote a package."""
    return f"{name} {PINNED[name]}"
