"""Facility energy and CO2e of one request: operational (grid) plus embodied (GPU manufacture).

A minimal model until the carbon issue lands; pure functions over numbers, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

JOULES_PER_KWH = 3.6e6
SECONDS_PER_YEAR = 365.25 * 24 * 3600.0

# Placeholder default until the carbon issue lands: a typical hyperscale/colocation PUE.
DEFAULT_PUE = 1.2
# Placeholder amortisation period of a GPU's embodied carbon [years].
DEFAULT_GPU_LIFETIME_YEARS = 5.0


@dataclass(frozen=True, slots=True)
class CarbonEstimate:
    """CO2e of one request [g], with the inputs it used.

    Attributes:
        facility_j: energy drawn from the grid [J] (GPU energy x PUE).
        operational_g: grid emissions of `facility_j` [gCO2e].
        embodied_g: share of the GPUs' manufacturing emissions for the request's duration [gCO2e].
        total_g: operational_g + embodied_g [gCO2e].
    """

    facility_j: float
    operational_g: float
    embodied_g: float
    total_g: float
    carbon_intensity_g_per_kwh: float
    pue: float


def facility_energy_j(gpu_j: float, pue: float = DEFAULT_PUE) -> float:
    """Energy at the facility meter [J] for `gpu_j` of GPU energy [J] under a PUE [-]."""
    return gpu_j * pue


def operational_carbon_g(facility_j: float, carbon_intensity_g_per_kwh: float) -> float:
    """Grid emissions [gCO2e] of `facility_j` [J] at an intensity [gCO2e/kWh]."""
    return facility_j / JOULES_PER_KWH * carbon_intensity_g_per_kwh


def embodied_carbon_g(
    gpu_embodied_kg_co2e: float,
    gpu_count: int,
    duration_s: float,
    lifetime_years: float = DEFAULT_GPU_LIFETIME_YEARS,
) -> float:
    """The request's share [gCO2e] of `gpu_count` GPUs' embodied carbon [kg each], amortised
    linearly over `lifetime_years` of use for `duration_s` [s]."""
    lifetime_s = lifetime_years * SECONDS_PER_YEAR
    return gpu_embodied_kg_co2e * 1000.0 * gpu_count * duration_s / lifetime_s


def request_carbon(
    gpu_j: float,
    duration_s: float,
    *,
    gpu_count: int,
    gpu_embodied_kg_co2e: float,
    carbon_intensity_g_per_kwh: float,
    pue: float = DEFAULT_PUE,
) -> CarbonEstimate:
    """Facility energy and CO2e of a request using `gpu_j` [J] over `duration_s` [s]."""
    facility_j = facility_energy_j(gpu_j, pue)
    operational_g = operational_carbon_g(facility_j, carbon_intensity_g_per_kwh)
    embodied_g = embodied_carbon_g(gpu_embodied_kg_co2e, gpu_count, duration_s)
    return CarbonEstimate(
        facility_j=facility_j,
        operational_g=operational_g,
        embodied_g=embodied_g,
        total_g=operational_g + embodied_g,
        carbon_intensity_g_per_kwh=carbon_intensity_g_per_kwh,
        pue=pue,
    )
