"""Which fitted profile prices a request's serving engine and version.

A profile is a coefficient set of `cost_model_coefficients.json` (`engines`), fitted on the
measurements of the engine versions it lists (`engine_versions`). An engine names a family of
profiles (vLLM: `vllm` for the versions the aiconfigurator serving runs measured, `vllm-v1`
and `vllm-v0` for ML.ENERGY's); a version that was measured takes its own profile, any other
the profile whose measured version is nearest, with a note, and an evidence label outside the
fitted engines so the quote's evidence level (service/pricing/evidence.py) widens its
intervals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

ENGINE_FAMILIES: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm", "vllm-v1", "vllm-v0"),
    "vllm-v1": ("vllm-v1",),
    "vllm-v0": ("vllm-v0",),
    "sglang": ("sglang",),
    "trtllm": ("trtllm",),
    "hf-transformers": ("hf-transformers",),
}
"""Each `serving.engine` name and the profiles its versions may take, its default first."""

STAND_IN_PROFILES: dict[str, str] = {
    # Eager PyTorch (what offline.measure runs): no CUDA graphs, the host launching every
    # kernel of every decode step. Of the fitted profiles, vLLM V0's (host work per step and
    # per sequence while the GPU waits) is the nearest; V1's CUDA-graph profile is not.
    "hf-transformers": "vllm-v0",
}
"""Engines whose own profile may not be fitted yet (no measurement campaign committed), and
the fitted profile that prices them meanwhile, with a note and an engine-level interval."""

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True, slots=True)
class EngineChoice:
    """The profile that prices an engine/version, the label the evidence level reads (the
    profile when the version was measured, else `engine==version`), and a warning or None."""

    profile: str
    evidence: str
    note: str | None = None


def release(version: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a version string ("0.5.1.post1" -> (0, 5, 1)); None for a
    build name without a release number ("gpt-oss-dev")."""
    match = _RELEASE.match(version.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def _distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> int:
    """Releases apart, weighting a major over any minor and a minor over any patch."""
    return abs((a[0] - b[0]) * 1_000_000 + (a[1] - b[1]) * 1_000 + (a[2] - b[2]))


def choose_profile(
    engine: str, version: str | None, measured: Mapping[str, tuple[str, ...]]
) -> EngineChoice:
    """The profile of `engine` at `version` given each profile's `measured` versions.

    An engine none of whose profiles was measured and that has a stand-in
    (`STAND_IN_PROFILES`): the stand-in, noted. No version: the engine's default profile. A
    measured version (compared as releases, so
    "0.5.9" and "v0.5.9" agree): its profile. Any other version: the profile with the nearest
    measured release (the default one when the version has no release number), noted.
    """
    family = ENGINE_FAMILIES[engine]
    if engine in STAND_IN_PROFILES and not any(p in measured for p in family):
        stand_in = STAND_IN_PROFILES[engine]
        evidence = engine if version is None else f"{engine}=={version}"
        note = (
            f"no fitted profile of {engine} yet (no measurement campaign of it): priced with "
            f"the {stand_in} profile, the nearest, and intervals as for an engine never fitted on"
        )
        return EngineChoice(stand_in, evidence, note)
    if version is None:
        return EngineChoice(family[0], family[0])
    wanted = release(version)
    candidates: list[tuple[str, tuple[int, int, int]]] = []
    for profile in family:
        for v in measured.get(profile, ()):
            got = release(v)
            if got is not None:
                candidates.append((profile, got))
    for profile, got in candidates:
        if wanted is not None and got == wanted:
            return EngineChoice(profile, profile)
    if wanted is None or not candidates:
        profile = family[0]
    else:
        profile = min(candidates, key=lambda c: _distance(wanted, c[1]))[0]
    known = ", ".join(sorted({v for p in family for v in measured.get(p, ())})) or "none"
    note = (
        f"no measurements of {engine} {version} (measured: {known}): priced with the "
        f"{profile} profile, the nearest, and intervals as for an engine never fitted on"
    )
    return EngineChoice(profile, f"{engine}=={version}", note)
