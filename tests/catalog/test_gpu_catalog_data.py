"""Structural and plausibility checks for service/catalog/data/gpus.json.

Pure json + pytest: no project imports, so the data file can be validated on its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DATA_PATH = Path(__file__).resolve().parents[2] / "service" / "catalog" / "data" / "gpus.json"

REQUIRED_IDS = {
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "H100-SXM5-80GB",
    "H100-PCIE-80GB",
    "H200-SXM-141GB",
    "B200",
    "L4",
    "T4",
    "A10G",
    "L40S",
    "V100-SXM2-32GB",
    "MI300X",
    "B300",
    "GB200",
    "GB300",
    "GH200",
    "MI250",
    "RTX-4090",
    "RTX-PRO-6000",
    "H20",
    "MI325X",
    "Gaudi3",
}

# Every numeric field must have an entry of the same name in the GPU's ``sources`` map.
NUMERIC_FIELDS = (
    "sm_count",
    "boost_clock_hz",
    "cuda_core_fp32_flops_per_s",
    "special_function_ops_per_s",
    "memory_bytes",
    "memory_bandwidth_bytes_per_s",
    "l2_cache_bytes",
    "interconnect_bandwidth_bytes_per_s",
    "pcie_bandwidth_bytes_per_s",
    "tdp_w",
    "idle_w",
    "die_area_mm2",
    "process_node_nm",
    "transistor_count",
    "release_year",
    "embodied_kg_co2e",
    "interconnect_domain_gpus",
    "scale_out_bandwidth_bytes_per_s",
)
# Figures a vendor may not publish: null, with a source that says "not published".
UNPUBLISHED_ALLOWED = frozenset({"die_area_mm2", "transistor_count"})
STRING_FIELDS = (
    "id",
    "name",
    "vendor",
    "architecture",
    "form_factor",
    "memory_type",
    "interconnect_name",
    "process_name",
    "embodied_method",
)
REQUIRED_FIELDS = (
    *STRING_FIELDS,
    *NUMERIC_FIELDS,
    "aliases",
    "tensor_dense_flops_per_s",
    "sources",
)
TENSOR_PRECISIONS = {"tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"}
EMBODIED_METHODS = {"product-carbon-footprint", "boavizta-bottom-up", "llmcarbon-die-area"}

# (low, high) exclusive plausibility bounds, SI units.
RANGES = {
    "sm_count": (10, 400),
    "boost_clock_hz": (5e8, 3.5e9),
    "cuda_core_fp32_flops_per_s": (1e12, 5e14),
    "special_function_ops_per_s": (1e11, 1e14),
    "memory_bytes": (1e9, 1e12),
    "memory_bandwidth_bytes_per_s": (1e11, 2e13),
    "l2_cache_bytes": (1e6, 5e8),
    "interconnect_bandwidth_bytes_per_s": (8e9, 2e12),
    "pcie_bandwidth_bytes_per_s": (8e9, 1.3e11),
    "tdp_w": (20, 2000),
    "idle_w": (0, 300),
    "die_area_mm2": (100, 3000),
    "process_node_nm": (2, 17),
    "transistor_count": (1e9, 1e12),
    "release_year": (2015, 2027),
    "embodied_kg_co2e": (0, 2000),
    "interconnect_domain_gpus": (0, 600),
    "scale_out_bandwidth_bytes_per_s": (1e9, 2.1e11),
}
TENSOR_RANGE = (1e12, 1e17)
SFU_RESULTS_PER_CLOCK_PER_SM = 16
URL_RE = re.compile(r"https?://\S+")


def _load() -> dict:
    with DATA_PATH.open(encoding="utf-8") as fh:
        return json.load(fh)


CATALOG = _load()
GPUS = CATALOG["gpus"]
BY_ID = {g["id"]: g for g in GPUS}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_top_level_shape() -> None:
    assert set(CATALOG) == {"catalog", "version", "notes", "gpus"}
    assert CATALOG["catalog"] == "gpus"
    assert re.fullmatch(r"\d{4}\.\d+\.\d+", CATALOG["version"])
    assert isinstance(CATALOG["notes"], str)
    assert len(CATALOG["notes"]) > 80
    assert "dense" in CATALOG["notes"]
    assert isinstance(GPUS, list)
    assert GPUS


def test_ids_unique_and_required_present() -> None:
    ids = [g["id"] for g in GPUS]
    assert len(ids) == len(set(ids)), "duplicate GPU ids"
    missing = REQUIRED_IDS - set(ids)
    assert not missing, f"required GPU ids missing: {sorted(missing)}"


def test_aliases_unique_across_gpus() -> None:
    owner: dict[str, str] = {g["id"].casefold(): g["id"] for g in GPUS}
    for gpu in GPUS:
        aliases = gpu["aliases"]
        assert isinstance(aliases, list)
        for alias in aliases:
            assert isinstance(alias, str)
            assert alias.strip() == alias
            assert alias
            key = alias.casefold()
            previous = owner.get(key)
            assert previous in (None, gpu["id"]), (
                f"alias {alias!r} of {gpu['id']} collides with {previous}"
            )
            owner[key] = gpu["id"]


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g["id"])
class TestGpuEntry:
    def test_required_fields_and_types(self, gpu: dict) -> None:
        missing = [f for f in REQUIRED_FIELDS if f not in gpu]
        assert not missing, f"{gpu.get('id')}: missing fields {missing}"
        for field in STRING_FIELDS:
            assert isinstance(gpu[field], str), field
            assert gpu[field].strip(), field
        for field in NUMERIC_FIELDS:
            if gpu[field] is None and field in UNPUBLISHED_ALLOWED:
                assert "not published" in gpu["sources"][field], field
                continue
            assert _is_number(gpu[field]), f"{field} is not a number"
        for field in ("sm_count", "release_year", "process_node_nm", "interconnect_domain_gpus"):
            assert float(gpu[field]).is_integer(), field
        assert gpu["embodied_method"] in EMBODIED_METHODS

    def test_every_numeric_field_is_sourced(self, gpu: dict) -> None:
        sources = gpu["sources"]
        assert isinstance(sources, dict)
        expected = set(NUMERIC_FIELDS) | {
            f"tensor_dense_flops_per_s.{p}" for p in gpu["tensor_dense_flops_per_s"]
        }
        missing = sorted(expected - set(sources))
        assert not missing, f"{gpu['id']}: unsourced figures {missing}"
        unknown = sorted(set(sources) - expected)
        assert not unknown, f"{gpu['id']}: sources for unknown fields {unknown}"
        for key, citation in sources.items():
            assert isinstance(citation, str), key
            assert len(citation.strip()) >= 20, f"{key}: citation too short"
            assert URL_RE.search(citation), f"{key}: citation has no URL"

    def test_tensor_peaks(self, gpu: dict) -> None:
        tensor = gpu["tensor_dense_flops_per_s"]
        assert isinstance(tensor, dict)
        assert tensor, "at least one tensor precision"
        assert set(tensor) <= TENSOR_PRECISIONS, set(tensor) - TENSOR_PRECISIONS
        low, high = TENSOR_RANGE
        for precision, value in tensor.items():
            assert _is_number(value), precision
            assert low < value < high, f"{precision}={value:g}"
        fp32 = gpu["cuda_core_fp32_flops_per_s"]
        for precision in ("bf16", "fp16"):
            if precision in tensor:
                assert tensor[precision] >= fp32, f"{precision} tensor peak below FP32 vector"
        if "tf32" in tensor and "bf16" in tensor:
            assert tensor["bf16"] >= tensor["tf32"]
        if "fp8" in tensor and "bf16" in tensor:
            assert tensor["fp8"] >= tensor["bf16"]
        if "fp4" in tensor and "fp8" in tensor:
            assert tensor["fp4"] >= tensor["fp8"]
        if "int4" in tensor and "int8" in tensor:
            assert tensor["int4"] >= tensor["int8"]

    def test_units_plausible(self, gpu: dict) -> None:
        for field, (low, high) in RANGES.items():
            if gpu[field] is None and field in UNPUBLISHED_ALLOWED:
                continue
            assert low < gpu[field] < high, f"{field}={gpu[field]!r} outside ({low}, {high})"
        assert gpu["tdp_w"] > gpu["idle_w"] > 0
        # GPU-to-GPU fabric is never slower than the host PCIe link it can fall back to.
        assert gpu["interconnect_bandwidth_bytes_per_s"] >= gpu["pcie_bandwidth_bytes_per_s"]
        # The network between domains is never faster than the links within one.
        assert gpu["scale_out_bandwidth_bytes_per_s"] <= gpu["interconnect_bandwidth_bytes_per_s"]
        # FP32 vector peak must be consistent with SM count and clock (<= 512 FLOP/clk/SM).
        per_sm_clock = gpu["cuda_core_fp32_flops_per_s"] / (gpu["sm_count"] * gpu["boost_clock_hz"])
        assert 60 < per_sm_clock < 520, per_sm_clock

    def test_sfu_rate_follows_stated_derivation(self, gpu: dict) -> None:
        expected = gpu["sm_count"] * SFU_RESULTS_PER_CLOCK_PER_SM * gpu["boost_clock_hz"]
        assert gpu["special_function_ops_per_s"] == pytest.approx(expected, rel=0.02)
        assert gpu["special_function_ops_per_s"] < gpu["cuda_core_fp32_flops_per_s"]
        assert "derived" in gpu["sources"]["special_function_ops_per_s"].casefold()

    def test_honesty_markers(self, gpu: dict) -> None:
        idle_note = gpu["sources"]["idle_w"].casefold()
        assert "estimate" in idle_note or "measured" in idle_note
        embodied_note = gpu["sources"]["embodied_kg_co2e"]
        if gpu["embodied_method"] == "llmcarbon-die-area":
            assert "LLMCarbon" in embodied_note
            assert "=" in embodied_note, "LLMCarbon note must show the arithmetic"
        elif gpu["embodied_method"] == "product-carbon-footprint":
            assert re.search(r"PCF|LCA|life-cycle|footprint", embodied_note)
        for precision in gpu["tensor_dense_flops_per_s"]:
            note = gpu["sources"][f"tensor_dense_flops_per_s.{precision}"].casefold()
            assert "dense" in note or "no sparsity" in note, precision


def test_precision_support_matches_hardware() -> None:
    def keys(gpu_id: str) -> set[str]:
        return set(BY_ID[gpu_id]["tensor_dense_flops_per_s"])

    for gpu_id in ("A100-SXM4-40GB", "A100-SXM4-80GB"):
        assert "fp8" not in keys(gpu_id)
        assert "fp4" not in keys(gpu_id)
    assert keys("V100-SXM2-32GB") == {"fp16"}
    assert keys("T4") == {"fp16", "int8", "int4"}
    for gpu in GPUS:
        if gpu["architecture"] == "Hopper":
            assert "int4" not in keys(gpu["id"]), gpu["id"]
            assert "fp4" not in keys(gpu["id"]), gpu["id"]
        if gpu["architecture"] in ("Volta", "Turing"):
            assert "bf16" not in keys(gpu["id"]), gpu["id"]
    for gpu_id in ("B200", "B300", "GB200", "GB300", "RTX-PRO-6000"):
        assert "fp4" in keys(gpu_id), gpu_id
    assert "fp8" not in keys("MI250")  # CDNA 2: no FP8 matrix cores


def test_interconnect_domains() -> None:
    """NVLink domains as built: 8 GPUs on an HGX baseboard, 72 in an NVL72 rack."""
    for gpu_id in ("H100-SXM5-80GB", "H200-SXM-141GB", "B200", "B300", "A100-SXM4-80GB"):
        assert BY_ID[gpu_id]["interconnect_domain_gpus"] == 8, gpu_id
    for gpu_id in ("GB200", "GB300"):
        assert BY_ID[gpu_id]["interconnect_domain_gpus"] == 72, gpu_id
    # 400 Gb/s ConnectX-7 per H100, 800 Gb/s ConnectX-8 per B300: 50 and 100 GB/s per direction.
    assert BY_ID["H100-SXM5-80GB"]["scale_out_bandwidth_bytes_per_s"] == pytest.approx(50e9)
    assert BY_ID["B300"]["scale_out_bandwidth_bytes_per_s"] == pytest.approx(100e9)


def test_known_anchor_figures() -> None:
    h100 = BY_ID["H100-SXM5-80GB"]
    assert h100["tensor_dense_flops_per_s"]["bf16"] == pytest.approx(989.4e12, rel=0.01)
    assert h100["cuda_core_fp32_flops_per_s"] == pytest.approx(67e12, rel=0.01)
    assert h100["memory_bytes"] == 80e9
    assert h100["memory_bandwidth_bytes_per_s"] == pytest.approx(3.35e12)
    assert h100["interconnect_bandwidth_bytes_per_s"] == pytest.approx(450e9)
    assert BY_ID["A100-SXM4-80GB"]["cuda_core_fp32_flops_per_s"] == pytest.approx(19.5e12)
    assert BY_ID["A100-SXM4-40GB"]["interconnect_bandwidth_bytes_per_s"] == pytest.approx(300e9)
    assert BY_ID["H200-SXM-141GB"]["interconnect_bandwidth_bytes_per_s"] == pytest.approx(450e9)
    assert BY_ID["B200"]["interconnect_bandwidth_bytes_per_s"] == pytest.approx(900e9)
    assert BY_ID["H100-PCIE-80GB"]["interconnect_bandwidth_bytes_per_s"] == pytest.approx(64e9)
    assert BY_ID["V100-SXM2-32GB"]["interconnect_bandwidth_bytes_per_s"] == pytest.approx(150e9)
    for gpu_id in ("L4", "T4", "A10G", "L40S"):
        gpu = BY_ID[gpu_id]
        assert gpu["interconnect_bandwidth_bytes_per_s"] == gpu["pcie_bandwidth_bytes_per_s"]
