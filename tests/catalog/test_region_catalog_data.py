"""The region catalogue: every figure has a year and a public source, and values are plausible."""

from __future__ import annotations

import pytest

from service.catalog.regions import UnknownRegion, load_region_catalog


def test_regions_have_sources_and_plausible_intensities() -> None:
    catalog = load_region_catalog()
    codes = {r.code for r in catalog.records}
    assert {
        "WORLD",
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
        "CN",
    } <= codes
    for region in catalog.records:
        assert 0 < region.carbon_intensity_g_per_kwh < 1200, region
        assert 2015 <= region.year <= 2026, region
        assert "https://" in region.source, region
    assert catalog.default.code == "WORLD"
    assert (
        catalog.get("FR").carbon_intensity_g_per_kwh < catalog.get("PL").carbon_intensity_g_per_kwh
    )


def test_lookup_is_case_insensitive_with_suggestions() -> None:
    catalog = load_region_catalog()
    assert catalog.get("us-ca").code == "US-CA"
    with pytest.raises(UnknownRegion) as raised:
        catalog.get("US-C")
    assert "US-CA" in raised.value.suggestions
