"""Properties of the carbon model: linear in intensity and PUE; bounds bracket; sums add."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from service.core.carbon import CarbonFactors, request_carbon
from service.core.facility import ServerProfile
from service.core.uncertainty import Ranged, product, total

FEW = settings(max_examples=60, deadline=None)
POSITIVE = st.floats(0.01, 1e4, allow_nan=False, allow_infinity=False)
SCALE = st.floats(0.05, 20.0, allow_nan=False, allow_infinity=False)
LOW = st.floats(0.3, 1.0)
HIGH = st.floats(1.0, 4.0)


@st.composite
def ranged(draw: st.DrawFn, values: st.SearchStrategy[float] = POSITIVE) -> Ranged:
    return Ranged(draw(values), draw(LOW), draw(HIGH))


@st.composite
def carbon_factors(draw: st.DrawFn) -> CarbonFactors:
    server = ServerProfile(draw(st.sampled_from([1, 4, 8])), draw(ranged()), draw(ranged()))
    return CarbonFactors(
        gpu_count=draw(st.integers(1, 16)),
        server=server,
        carbon_intensity_g_per_kwh=draw(ranged(st.floats(1.0, 1200.0))),
        pue=draw(ranged(st.floats(1.0, 2.5))),
        gpu_embodied_kg_co2e=draw(ranged()),
        lifetime_years=draw(ranged(st.floats(1.0, 10.0))),
        utilisation=Ranged(draw(st.floats(0.05, 1.0)), draw(LOW), 1.0),
        wue_l_per_kwh=draw(ranged(st.floats(0.0, 3.0))),
        offsite_water_l_per_kwh=draw(ranged(st.floats(0.1, 20.0))),
    )


@FEW
@given(carbon_factors(), ranged(), POSITIVE, SCALE)
def test_operational_is_linear_in_intensity(
    factors: CarbonFactors, gpu_j: Ranged, duration_s: float, k: float
) -> None:
    base = request_carbon(gpu_j, duration_s, factors)
    scaled_intensity = factors.carbon_intensity_g_per_kwh.scaled(k)
    scaled = request_carbon(
        gpu_j, duration_s, dataclasses.replace(factors, carbon_intensity_g_per_kwh=scaled_intensity)
    )
    assert_allclose(scaled.operational_g.value, k * base.operational_g.value, rtol=1e-9)
    assert_allclose(scaled.operational_g.high, k * base.operational_g.high, rtol=1e-9)
    assert_allclose(scaled.embodied_g.value, base.embodied_g.value, rtol=1e-12)


@FEW
@given(carbon_factors(), ranged(), POSITIVE, SCALE)
def test_operational_and_facility_energy_are_linear_in_pue(
    factors: CarbonFactors, gpu_j: Ranged, duration_s: float, k: float
) -> None:
    base = request_carbon(gpu_j, duration_s, factors)
    scaled = request_carbon(
        gpu_j, duration_s, dataclasses.replace(factors, pue=factors.pue.scaled(k))
    )
    assert_allclose(scaled.operational_g.value, k * base.operational_g.value, rtol=1e-9)
    assert_allclose(scaled.facility_j.value, k * base.facility_j.value, rtol=1e-9)
    assert_allclose(scaled.it_j.value, base.it_j.value, rtol=1e-12)


@FEW
@given(carbon_factors(), ranged(), POSITIVE)
def test_totals_add_and_bounds_bracket(
    factors: CarbonFactors, gpu_j: Ranged, duration_s: float
) -> None:
    result = request_carbon(gpu_j, duration_s, factors)
    assert_allclose(result.total_g.value, result.operational_g.value + result.embodied_g.value)
    assert_allclose(result.total_g.low, result.operational_g.low + result.embodied_g.low)
    assert_allclose(
        result.embodied_g.value, result.embodied.gpus_g.value + result.embodied.server_g.value
    )
    assert_allclose(
        result.water.total_l.value, result.water.onsite_l.value + result.water.offsite_l.value
    )
    for quantity in (result.facility_j, result.operational_g, result.embodied_g, result.total_g):
        assert quantity.low <= quantity.value * (1 + 1e-12)
        assert quantity.value <= quantity.high * (1 + 1e-12)


@FEW
@given(st.lists(ranged(), min_size=1, max_size=5))
def test_quadrature_is_never_wider_than_interval_arithmetic(factors: list[Ranged]) -> None:
    combined = product(*factors)
    assert combined.low_ratio >= math.prod(f.low_ratio for f in factors) * (1 - 1e-12)
    assert combined.high_ratio <= math.prod(f.high_ratio for f in factors) * (1 + 1e-12)
    widest = max(factors, key=lambda f: f.high_ratio)
    assert combined.high_ratio >= widest.high_ratio * (1 - 1e-12)
    summed = total(*factors)
    assert_allclose(summed.low, sum(f.low for f in factors))
