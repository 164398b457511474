"""The carbon block of POST /v1/estimate: the accounting identities, regional contrast, defaults
and overrides, and the factors a bill needs, stored with the quote."""

from __future__ import annotations

from typing import Any

import pytest
from api_support import example_body
from fastapi.testclient import TestClient
from numpy.testing import assert_allclose

from service.catalog.facilities import load_facility_catalog
from service.catalog.gpus import load_gpu_catalog
from service.catalog.regions import load_region_catalog
from service.catalog.servers import load_server_catalog
from service.core.carbon import JOULES_PER_KWH, SECONDS_PER_YEAR

RTOL = 1e-9
FACTOR_NAMES = {
    "carbon_intensity_g_per_kwh",
    "pue",
    "server_non_gpu_power_w",
    "server_embodied_kg_co2e",
    "gpu_embodied_kg_co2e",
    "lifetime_years",
    "utilisation",
    "wue_l_per_kwh",
    "offsite_water_l_per_kwh",
}


def quote(client: TestClient, **datacenter: Any) -> dict[str, Any]:
    body = example_body(datacenter=datacenter) if datacenter else example_body()
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    return payload


def test_coal_heavy_grid_emits_several_times_a_low_carbon_one(client: TestClient) -> None:
    poland, france = quote(client, region="PL"), quote(client, region="FR")
    assert poland["energy"]["facility_j"] == france["energy"]["facility_j"]
    # 662 / 56 gCO2e/kWh (Ember 2023): 11.8x the operational carbon for the same energy.
    ratio = poland["carbon"]["operational_g"] / france["carbon"]["operational_g"]
    assert ratio >= 5
    assert_allclose(ratio, 662 / 56, rtol=RTOL)
    assert poland["carbon"]["embodied_g"] == france["carbon"]["embodied_g"]


@pytest.mark.parametrize("region", ["PL", "US-CA", "us-east-1", "europe-west4", "swedencentral"])
def test_accounting_identities(client: TestClient, region: str) -> None:
    body = quote(client, region=region)
    energy, carbon, total_s = body["energy"], body["carbon"], body["latency"]["total_s"]
    facility_kwh = energy["facility_j"] / JOULES_PER_KWH
    # operational = facility kWh x intensity; total = operational + embodied.
    assert_allclose(
        carbon["operational_g"], facility_kwh * carbon["carbon_intensity_g_per_kwh"], rtol=RTOL
    )
    assert_allclose(carbon["total_g"], carbon["operational_g"] + carbon["embodied_g"], rtol=RTOL)
    assert_allclose(
        carbon["embodied_g"], carbon["embodied_gpu_g"] + carbon["embodied_server_g"], rtol=RTOL
    )
    # facility = (GPU + server share) x PUE, the server share = its power x duration.
    assert_allclose(carbon["server_overhead_w"] * total_s, energy["server_overhead_j"], rtol=RTOL)
    assert_allclose(
        energy["facility_j"], (energy["gpu_j"] + energy["server_overhead_j"]) * carbon["pue"]
    )
    for name in ("operational_g", "embodied_g", "total_g", "water_l"):
        assert carbon[f"{name}_low"] <= carbon[name] <= carbon[f"{name}_high"], name
    assert carbon["total_g_high"] / carbon["total_g_low"] > 1.5  # energy, grid, PUE, embodied


def test_embodied_from_catalogue_figures(client: TestClient) -> None:
    carbon, total_s = (b := quote(client, region="FR"))["carbon"], b["latency"]["total_s"]
    gpu = load_gpu_catalog().get("H100-SXM5-80GB")
    server, _ = load_server_catalog().for_gpu(gpu.id)
    lifetime_s = 5 * SECONDS_PER_YEAR  # default life, fully used
    held_kg = 2 * gpu.embodied_kg_co2e + 2 / 8 * server.non_gpu_embodied_kg_co2e.value
    assert_allclose(carbon["embodied_g"], held_kg * 1000 * total_s / lifetime_s, rtol=RTOL)
    assert carbon["embodied_method"] == "product-carbon-footprint"
    assert (carbon["lifetime_years"], carbon["utilisation"]) == (5.0, 1.0)


def test_explicit_values_win_and_are_used_exactly(client: TestClient) -> None:
    given = {"pue": 1.5, "carbon_intensity_g_per_kwh": 400.0, "wue_l_per_kwh": 0.5}
    base = quote(client, region="FR", **given)
    carbon = base["carbon"]
    assert carbon["carbon_intensity_g_per_kwh"] == 400.0 and carbon["pue"] == 1.5
    assert carbon["carbon_intensity_source"] == "explicit carbon_intensity_g_per_kwh"
    for name in ("carbon_intensity_g_per_kwh", "pue", "wue_l_per_kwh"):
        factor = carbon["factors"][name]
        assert not factor["defaulted"] and factor["low"] == factor["value"] == factor["high"]
    # Half the life idle doubles embodied; a 2.5-year life doubles it again.
    idle = quote(client, region="FR", **given, utilisation=0.5, lifetime_years=2.5)
    assert_allclose(idle["carbon"]["embodied_g"], 4 * carbon["embodied_g"], rtol=RTOL)
    assert idle["carbon"]["operational_g"] == carbon["operational_g"]
    # Water: WUE x IT kWh + grid water (France) x facility kWh.
    energy = base["energy"]
    it_kwh = (energy["gpu_j"] + energy["server_overhead_j"]) / JOULES_PER_KWH
    offsite = load_facility_catalog().offsite_water_l_per_kwh("FR")[1]
    expected = 0.5 * it_kwh + offsite * energy["facility_j"] / JOULES_PER_KWH
    assert_allclose(carbon["water_l"], expected, rtol=RTOL)


def test_cloud_region_takes_its_grid_zone_and_provider_defaults(client: TestClient) -> None:
    carbon = quote(client, region="aws:us-east-1")["carbon"]
    srvc = load_region_catalog().get("US-SRVC")
    assert carbon["region"] == "us-east-1"
    assert carbon["carbon_intensity_g_per_kwh"] == srvc.carbon_intensity_g_per_kwh
    assert "eGRID" in carbon["carbon_intensity_source"]
    facilities = load_facility_catalog()
    assert carbon["pue"] == facilities.pue("aws")[1].value
    assert carbon["factors"]["wue_l_per_kwh"]["value"] == facilities.wue_l_per_kwh("aws")[1].value
    google = quote(client, region="europe-west9")["carbon"]
    assert google["pue"] == facilities.pue("gcp")[1].value


def test_default_region_is_the_world_with_industry_defaults(client: TestClient) -> None:
    body = client.post("/v1/estimate", json=example_body(), params={"verbose": "true"}).json()
    carbon = body["carbon"]
    assert carbon["region"] == "WORLD" and carbon["carbon_intensity_g_per_kwh"] == 481
    assert carbon["pue"] == 1.56
    assert any("no datacenter region" in w for w in body["warnings"])
    defaulted = body["breakdown"]["defaulted_inputs"]
    assert defaulted["datacenter.region"] == "WORLD" and defaulted["datacenter.pue"] == 1.56
    assert {"datacenter.lifetime_years", "datacenter.utilisation"} <= set(defaulted)


def test_the_stored_quote_explains_every_factor(client: TestClient) -> None:
    body = quote(client, region="DE")
    factors = body["carbon"]["factors"]
    assert set(factors) == FACTOR_NAMES
    for name, factor in factors.items():
        assert factor["low"] <= factor["value"] <= factor["high"], name
        assert factor["unit"] and "https://" in factor["source"], name
    assert "HGX H100" in factors["gpu_embodied_kg_co2e"]["source"]
    assert "Uptime" in factors["pue"]["source"]
    stored = client.get(f"/v1/quotes/{body['quote_id']}")
    assert stored.status_code == 200, stored.text
    assert stored.json()["response"]["carbon"]["factors"] == factors


def test_regions_endpoint_lists_every_zone_with_sources(client: TestClient) -> None:
    regions = client.get("/v1/regions").json()
    assert len(regions["items"]) >= 50
    codes = {r["code"] for r in regions["items"]}
    assert {"PL", "FR", "US-SRVC", "us-east-1", "europe-west4", "westeurope"} <= codes
    assert all("https://" in r["source"] for r in regions["items"])


def test_unknown_region_suggests_near_matches(client: TestClient) -> None:
    response = client.post("/v1/estimate", json=example_body(datacenter={"region": "us-east-9"}))
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["loc"] == "datacenter.region"
    assert "us-east-1" in problem["suggestions"]


@pytest.mark.parametrize(
    "datacenter",
    [{"utilisation": 0.0}, {"utilisation": 1.5}, {"lifetime_years": 0}, {"wue_l_per_kwh": -1.0}],
)
def test_out_of_range_overrides_are_422(client: TestClient, datacenter: dict[str, Any]) -> None:
    response = client.post("/v1/estimate", json=example_body(datacenter=datacenter))
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"].startswith("datacenter.")
