"""The placeholder carbon model against hand formulas."""

from __future__ import annotations

import pytest
from numpy.testing import assert_allclose

from service.core.carbon import (
    DEFAULT_PUE,
    embodied_carbon_g,
    facility_energy_j,
    operational_carbon_g,
    request_carbon,
)


def test_one_kwh_at_400_g_per_kwh_is_400_g() -> None:
    assert_allclose(operational_carbon_g(3.6e6, 400.0), 400.0)


def test_facility_energy_applies_pue() -> None:
    assert facility_energy_j(1000.0) == pytest.approx(1000.0 * DEFAULT_PUE)
    assert facility_energy_j(1000.0, 1.5) == pytest.approx(1500.0)


def test_embodied_share_over_five_years() -> None:
    five_years_s = 5 * 365.25 * 24 * 3600
    # A whole lifetime of one GPU is its whole embodied carbon.
    assert_allclose(embodied_carbon_g(150.0, 1, five_years_s), 150_000.0)
    assert_allclose(embodied_carbon_g(150.0, 4, 10.0), 150_000.0 * 4 * 10.0 / five_years_s)


def test_request_carbon_adds_up() -> None:
    result = request_carbon(
        1800.0,
        2.0,
        gpu_count=2,
        gpu_embodied_kg_co2e=100.0,
        carbon_intensity_g_per_kwh=500.0,
        pue=1.25,
    )
    assert_allclose(result.facility_j, 2250.0)
    assert_allclose(result.operational_g, 2250.0 / 3.6e6 * 500.0)
    assert_allclose(result.total_g, result.operational_g + result.embodied_g)
    assert result.embodied_g > 0
