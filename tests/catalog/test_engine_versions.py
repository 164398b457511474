"""Which fitted profile an engine and version take (service/catalog/engine_versions.py)."""

from __future__ import annotations

import pytest

from service.catalog.engine_versions import choose_profile, release
from service.catalog.engines import load_engine_coefficients, load_engine_versions

MEASURED = {
    "vllm": ("0.12.0", "0.18.0"),
    "vllm-v1": ("0.11.1",),
    "vllm-v0": ("0.5.4",),
    "sglang": ("0.5.1.post1", "0.5.9", "glm5-hopper"),
}


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.5.1.post1", (0, 5, 1)),
        ("v0.18.0", (0, 18, 0)),
        ("1.0.0rc3", (1, 0, 0)),
        ("0.9", (0, 9, 0)),
    ],
)
def test_release_numbers(version: str, expected: tuple[int, int, int]) -> None:
    assert release(version) == expected


def test_a_build_name_has_no_release() -> None:
    assert release("gpt-oss-dev") is None


@pytest.mark.parametrize(
    ("engine", "version", "profile"),
    [
        ("vllm", None, "vllm"),
        ("vllm", "0.5.4", "vllm-v0"),
        ("vllm", "v0.11.1", "vllm-v1"),
        ("vllm", "0.18.0", "vllm"),
        ("sglang", "0.5.9", "sglang"),
    ],
)
def test_a_measured_version_takes_its_own_profile(
    engine: str, version: str | None, profile: str
) -> None:
    choice = choose_profile(engine, version, MEASURED)
    assert (choice.profile, choice.evidence, choice.note) == (profile, profile, None)


@pytest.mark.parametrize(
    ("engine", "version", "profile"),
    [
        # 0.17.1 is 999 from 0.18.0 (a minor less a patch) and 5,001 from 0.12.0: vllm.
        ("vllm", "0.17.1", "vllm"),
        # 0.6.3 is 999 patches-equivalent from 0.5.4 and 4,998 from 0.11.1: vllm-v0.
        ("vllm", "0.6.3", "vllm-v0"),
        # 0.10.0 is 1,001 from 0.11.1, 2,000 from 0.12.0 and 4,996 from 0.5.4: vllm-v1.
        ("vllm", "0.10.0", "vllm-v1"),
        ("sglang", "0.4.0", "sglang"),
        ("sglang", "nightly", "sglang"),  # no release number: the engine's default profile
        ("trtllm", "1.0.0", "trtllm"),  # no measured versions at all
    ],
)
def test_an_unmeasured_version_takes_the_nearest_profile_with_a_note(
    engine: str, version: str, profile: str
) -> None:
    choice = choose_profile(engine, version, MEASURED)
    assert choice.profile == profile
    assert choice.evidence == f"{engine}=={version}"
    assert choice.note is not None
    assert f"no measurements of {engine} {version}" in choice.note
    assert f"the {profile} profile" in choice.note


def test_every_engine_has_a_fitted_profile_and_its_measured_versions() -> None:
    coefficients, versions = load_engine_coefficients(), load_engine_versions()
    for profile in ("vllm", "sglang", "trtllm", "vllm-v1", "vllm-v0"):
        assert profile in coefficients
        assert versions[profile], profile
    assert versions["vllm-v1"] == ("0.11.1",) and versions["vllm-v0"] == ("0.5.4",)
    sglang, shared = coefficients["sglang"].roofline, coefficients["vllm-v1"].roofline
    assert sglang.tensor_efficiency != shared.tensor_efficiency
    assert sglang.memory_efficiency != shared.memory_efficiency


@pytest.mark.parametrize("version", [None, "2.13.0+cu128"])
def test_hf_transformers_without_a_campaign_takes_its_stand_in_with_a_note(
    version: str | None,
) -> None:
    choice = choose_profile("hf-transformers", version, MEASURED)
    assert choice.profile == "vllm-v0"
    label = "hf-transformers" if version is None else f"hf-transformers=={version}"
    assert choice.evidence == label
    assert choice.note is not None and "no fitted profile of hf-transformers" in choice.note
    assert "the vllm-v0 profile" in choice.note


def test_hf_transformers_once_fitted_takes_its_own_profile() -> None:
    fitted = {**MEASURED, "hf-transformers": ("2.13.0",)}
    assert choose_profile("hf-transformers", None, fitted).profile == "hf-transformers"
    assert choose_profile("hf-transformers", "2.13.0", fitted).note is None
    # The shipped coefficients hold no campaign yet: the stand-in is a fitted profile.
    shipped = load_engine_versions()
    assert "hf-transformers" not in shipped
    assert choose_profile("hf-transformers", None, shipped).profile in load_engine_coefficients()
