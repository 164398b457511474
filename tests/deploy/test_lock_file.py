"""requirements.lock pins every runtime dependency, with hashes, at a version pyproject allows.

The Docker build installs exactly the lock (`pip install --require-hashes`): a dependency added to
pyproject.toml without regenerating the lock would be missing from the image, and one whose
allowed range moved past the lock would be installed at a version the project no longer accepts.
Regenerate with the command in the lock's header.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.lock"


def locked_versions() -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9._-]+)==(\S+) \\$", LOCK.read_text(), flags=re.M)
    return {canonicalize_name(name): version for name, version in pins}


def test_every_runtime_dependency_is_locked_at_an_allowed_version() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    locked = locked_versions()
    for line in project["dependencies"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is not in requirements.lock"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"{name}=={locked[name]} is outside {requirement.specifier}"
        )


def test_every_pin_carries_a_hash() -> None:
    blocks = re.split(r"\n(?=[A-Za-z0-9._-]+==)", LOCK.read_text())
    pinned = [block for block in blocks if re.match(r"[A-Za-z0-9._-]+==", block)]
    assert len(pinned) == len(locked_versions()) > 20
    for block in pinned:
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", block), block.splitlines()[0]
