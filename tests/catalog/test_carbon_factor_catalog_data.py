"""Facility and server catalogues: every figure sourced, bands bracket values, every GPU placed."""

from __future__ import annotations

import json

import pytest

from service.catalog.facilities import load_facility_catalog
from service.catalog.gpus import load_gpu_catalog
from service.catalog.lookup import DATA_DIR
from service.catalog.regions import load_region_catalog
from service.catalog.servers import load_server_catalog
from service.core.carbon import DEFAULT_GPU_LIFETIME_YEARS, DEFAULT_PUE

FACILITIES = json.loads((DATA_DIR / "facilities.json").read_text(encoding="utf-8"))


def test_operator_pue_and_wue_are_sourced_and_ordered() -> None:
    catalog = load_facility_catalog()
    assert set(catalog.operators) == {"default", "gcp", "aws", "azure"}
    for operator in catalog.operators:
        _, pue = catalog.pue(operator)
        _, wue = catalog.wue_l_per_kwh(operator)
        assert 1.0 <= pue.low <= pue.value <= pue.high < 2.5
        assert 0.0 < wue.low <= wue.value <= wue.high < 5.0
        assert "https://" in pue.source and "https://" in wue.source
    # Hyperscale fleets beat the industry average the default stands for.
    assert all(
        catalog.pue(p)[1].value < catalog.pue(None)[1].value for p in ("gcp", "aws", "azure")
    )
    assert catalog.pue("unknown-cloud")[0] == "default"
    assert catalog.pue(None)[1].value == DEFAULT_PUE


def test_offsite_water_covers_every_region_country_or_falls_back_to_world() -> None:
    catalog = load_facility_catalog()
    table = FACILITIES["offsite_water_l_per_kwh"]["by_country"]
    assert "https://" in FACILITIES["offsite_water_l_per_kwh"]["source"]
    assert all(0.5 < v < 25 for v in table.values())
    assert catalog.offsite_water_l_per_kwh("US") == ("US", pytest.approx(3.13))
    assert catalog.offsite_water_l_per_kwh("ZZ")[0] == "WORLD"
    countries = {r.country for r in load_region_catalog().records}
    assert len(countries & set(table)) >= 25


def test_every_gpu_has_a_server_profile_and_an_embodied_band() -> None:
    servers = load_server_catalog()
    for gpu in load_gpu_catalog().records:
        record, fallback = servers.for_gpu(gpu.id)
        assert gpu.id in record.gpus or fallback
        assert not fallback, f"{gpu.id} is in no server profile"
        band = servers.gpu_embodied_band(str(gpu.raw["embodied_method"]))
        assert band.low_ratio <= 1.0 <= band.high_ratio and band.reason
    # A die-area figure is a lower bound: its band only reaches up.
    assert servers.gpu_embodied_band("llmcarbon-die-area").low_ratio == 1.0


def test_server_profiles_and_amortisation_are_sourced() -> None:
    servers = load_server_catalog()
    for record in servers.records:
        assert record.gpus_per_server == 8
        for figure in (record.non_gpu_power_w, record.non_gpu_embodied_kg_co2e):
            assert figure.low <= figure.value <= figure.high and "https://" in figure.source
        assert 200 <= record.non_gpu_power_w.value <= 3000
        assert 1000 <= record.non_gpu_embodied_kg_co2e.value <= 10_000
    assert servers.lifetime_years.value == DEFAULT_GPU_LIFETIME_YEARS
    assert servers.lifetime_years.low == 3 and servers.lifetime_years.high == 6
    assert servers.utilisation.value == 1.0 and servers.utilisation.high == 1.0
    assert "https://" in servers.lifetime_years.source and "SCI" in servers.utilisation.source
