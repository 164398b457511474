"""request_carbon is written out in floats for speed; here it is held, to the last bit, to the
composition of the documented steps it replaces: IT energy (facility.it_energy_j), facility
energy (facility_energy_j), operational carbon (carbon.operational_g), embodied charges
(embodied per second held, scaled by the duration) and water (water.request_water), with
`total` for the sums. Random factors with and without bounds, exact (ratio 1) factors, and a
zero-energy request. The quote document's carbon block, written from `carbon_figures`, is held
to the same composition."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from test_carbon_properties import POSITIVE, carbon_factors, ranged

from service.core.carbon import (
    CarbonEstimate,
    CarbonFactors,
    carbon_figures,
    held_rates,
    operational_g,
    request_carbon,
)
from service.core.embodied import EmbodiedCharge
from service.core.facility import facility_energy_j, it_energy_j
from service.core.uncertainty import Ranged, total
from service.core.water import request_water
from service.pricing.carbon_accounting import CarbonInputs, carbon_members

MANY = settings(max_examples=300, deadline=None)


def composed(gpu_j: Ranged, duration_s: float, factors: CarbonFactors) -> CarbonEstimate:
    """The carbon of a request as the documented steps compose it."""
    rates = held_rates(factors)
    overhead_j = rates.server_overhead_w.scaled(duration_s)
    it_j = it_energy_j(gpu_j, overhead_j)
    facility_j = facility_energy_j(it_j, factors.pue)
    operational = operational_g(facility_j, factors.carbon_intensity_g_per_kwh)
    per_s = rates.embodied_per_s
    embodied = EmbodiedCharge(
        per_s.gpus_g.scaled(duration_s),
        per_s.server_g.scaled(duration_s),
        per_s.total_g.scaled(duration_s),
    )
    water = request_water(it_j, facility_j, factors.wue_l_per_kwh, factors.offsite_water_l_per_kwh)
    return CarbonEstimate(
        server_overhead_w=rates.server_overhead_w,
        server_overhead_j=overhead_j,
        it_j=it_j,
        facility_j=facility_j,
        operational_g=operational,
        embodied=embodied,
        total_g=total(operational, embodied.total_g),
        water=water,
    )


@MANY
@given(carbon_factors(), ranged(), POSITIVE)
def test_request_carbon_is_the_composition_to_the_last_bit(
    factors: CarbonFactors, gpu_j: Ranged, duration_s: float
) -> None:
    assert request_carbon(gpu_j, duration_s, factors) == composed(gpu_j, duration_s, factors)


@MANY
@given(carbon_factors(), POSITIVE, st.sampled_from([0.0, 1.0, 1800.0]))
def test_exact_factors_and_zero_energy_too(
    factors: CarbonFactors, duration_s: float, gpu_value_j: float
) -> None:
    exact = dataclasses.replace(
        factors,
        pue=Ranged(factors.pue.value),
        carbon_intensity_g_per_kwh=Ranged(factors.carbon_intensity_g_per_kwh.value),
        wue_l_per_kwh=Ranged(factors.wue_l_per_kwh.value),
    )
    for case in (factors, exact):
        gpu_j = Ranged(gpu_value_j)
        assert request_carbon(gpu_j, duration_s, case) == composed(gpu_j, duration_s, case)
        zero_time = request_carbon(gpu_j, 0.0, case)
        assert zero_time == composed(gpu_j, 0.0, case)


@MANY
@given(carbon_factors(), ranged(), POSITIVE)
def test_the_documents_carbon_block_is_the_composition_to_the_last_bit(
    factors: CarbonFactors, gpu_j: Ranged, duration_s: float
) -> None:
    rates = held_rates(factors)
    figures = carbon_figures(gpu_j, duration_s, factors, rates)
    members = carbon_members(CarbonInputs(factors, "DE", "source", "method"), figures, rates)
    reference = composed(gpu_j, duration_s, factors)
    bounded = {
        "operational_g": reference.operational_g,
        "embodied_g": reference.embodied_g,
        "total_g": reference.total_g,
        "water_l": reference.water.total_l,
    }
    for name, value in bounded.items():
        assert members[name] == value.value
        assert (members[f"{name}_low"], members[f"{name}_high"]) == (value.low, value.high)
    assert members["embodied_gpu_g"] == reference.embodied.gpus_g.value
    assert members["embodied_server_g"] == reference.embodied.server_g.value
    assert members["server_overhead_w"] == reference.server_overhead_w.value
    assert figures.server_overhead_j == reference.server_overhead_j.value
    assert figures.facility_j[0] == reference.facility_j.value
