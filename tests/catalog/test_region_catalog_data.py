"""The region catalogue: every figure has a year, a basis and a public source, values are plausible,
conversions match the published figures, and cloud regions resolve to their grid zone."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from service.catalog.lookup import DATA_DIR
from service.catalog.regions import UnknownRegion, load_region_catalog

DOCUMENT = json.loads((DATA_DIR / "regions.json").read_text(encoding="utf-8"))


def test_regions_have_sources_and_plausible_intensities() -> None:
    catalog = load_region_catalog()
    codes = {r.code for r in catalog.records}
    assert {
        "WORLD",
        "US",
        "US-CA",
        "US-TX",
        "FR",
        "PL",
        "DE",
        "SE",
        "IE",
        "GB",
        "IN",
        "JP",
    } <= codes
    assert {"CN", "NO", "BR", "AU", "CA"} <= codes
    assert len(catalog.records) >= 50
    for region in catalog.records:
        assert 0 < region.carbon_intensity_g_per_kwh < 1200, region
        assert 2015 <= region.year <= 2026, region
        assert "https://" in region.source, region
        assert region.basis in {"lifecycle", "direct"}, region
        assert region.kind in {"country", "grid-zone", "cloud-region"}, region
        assert region.country == "WORLD" or len(region.country) == 2, region
    assert catalog.default.code == "WORLD"
    assert (
        catalog.get("FR").carbon_intensity_g_per_kwh < catalog.get("PL").carbon_intensity_g_per_kwh
    )


def test_catalogue_spans_countries_grid_zones_and_three_clouds() -> None:
    records = load_region_catalog().records
    kinds = Counter(r.kind for r in records)
    assert kinds["country"] >= 25 and kinds["grid-zone"] >= 20
    providers = Counter(r.provider for r in records if r.kind == "cloud-region")
    assert providers["aws"] >= 20 and providers["gcp"] >= 40 and providers["azure"] >= 20


def test_egrid_figures_match_the_published_rates() -> None:
    # eGRID2022 CAMX: CO2 497.443, CH4 0.03, N2O 0.004 lb/MWh; CO2e = 497.443 + 28 x 0.03 +
    # 265 x 0.004 = 499.343 lb/MWh x 0.453592 = 226.5 g/kWh.
    assert load_region_catalog().get("US-CA").carbon_intensity_g_per_kwh == pytest.approx(226.5)
    for entry in DOCUMENT["regions"]:
        rates = entry.get("published_lb_per_mwh")
        if rates is None:
            continue
        co2e = rates["co2"] + 28 * rates["ch4"] + 265 * rates["n2o"]
        assert entry["carbon_intensity_g_per_kwh"] == pytest.approx(co2e * 0.453592, abs=0.05)


def test_cloud_regions_take_their_grid_zone_figure() -> None:
    catalog = load_region_catalog()
    virginia = catalog.get("us-east-1")
    assert virginia.provider == "aws" and virginia.intensity_from == "US-SRVC"
    srvc = catalog.get("US-SRVC")
    assert virginia.carbon_intensity_g_per_kwh == srvc.carbon_intensity_g_per_kwh
    assert virginia.year == srvc.year and srvc.source in virginia.source
    assert catalog.get("azure:francecentral").carbon_intensity_g_per_kwh == 56
    assert catalog.get("gcp:europe-west9").carbon_intensity_g_per_kwh == pytest.approx(16.3)
    for region in catalog.records:
        if region.provider in {"aws", "azure"}:
            target = catalog.get(region.intensity_from)
            assert target.intensity_from == target.code, region  # one hop, to an own figure
            assert target.carbon_intensity_g_per_kwh == region.carbon_intensity_g_per_kwh


def test_lookup_is_case_insensitive_with_aliases_and_suggestions() -> None:
    catalog = load_region_catalog()
    assert catalog.get("us-ca").code == "US-CA"
    assert catalog.get("CAMX").code == "US-CA"
    assert catalog.get("DE-LU").code == "DE"
    assert catalog.get("AWS:EU-WEST-3").code == "eu-west-3"
    with pytest.raises(UnknownRegion) as raised:
        catalog.get("US-C")
    assert "US-CA" in raised.value.suggestions
