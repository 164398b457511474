"""CO2e and water of one request: operational (facility energy x grid) plus embodied (hardware).

Pure functions over numbers, no I/O. The accounting, per request:

- IT energy [J] = GPU energy + the held servers' non-GPU power x duration (`facility.py`);
- facility energy [J] = IT energy x PUE;
- operational [gCO2e] = facility energy [kWh] x location-based grid intensity [gCO2e/kWh];
- embodied [gCO2e] = (held GPUs' + held server share's manufacturing emissions) x duration /
  (lifetime x utilisation) (`embodied.py`);
- water [L] = WUE x IT energy + grid water intensity x facility energy (`water.py`).

Bounds: each factor is `Ranged`; products combine bounds in log space in quadrature, sums add them
end to end (`uncertainty.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from service.core.embodied import SECONDS_PER_YEAR, EmbodiedCharge, request_embodied_g
from service.core.facility import (
    JOULES_PER_KWH,
    ServerProfile,
    kwh,
    server_overhead_power_w,
)
from service.core.uncertainty import Ranged, product
from service.core.water import WaterUse

__all__ = [
    "DEFAULT_GPU_LIFETIME_YEARS",
    "DEFAULT_PUE",
    "JOULES_PER_KWH",
    "SECONDS_PER_YEAR",
    "Bounded",
    "CarbonEstimate",
    "CarbonFactors",
    "CarbonFigures",
    "HeldRates",
    "carbon_figures",
    "held_rates",
    "operational_carbon_g",
    "request_carbon",
]

# World-average PUE (Uptime Institute Global Data Center Survey 2024), the fallback the facility
# catalogue also uses for data centres of no known operator.
DEFAULT_PUE = 1.56
# Default service life of GPU servers [years] (the facility catalogue gives its source).
DEFAULT_GPU_LIFETIME_YEARS = 5.0


@dataclass(frozen=True, slots=True)
class CarbonFactors:
    """Everything but the GPU energy and duration that prices a request's CO2e and water.

    Attributes:
        gpu_count: GPUs the request holds [-].
        server: the non-GPU part of their servers (power [W], embodied [kgCO2e], GPUs per server).
        carbon_intensity_g_per_kwh: location-based grid intensity [gCO2e/kWh].
        pue: power usage effectiveness of the facility [-].
        gpu_embodied_kg_co2e: manufacturing emissions of one GPU [kgCO2e].
        lifetime_years: service life the hardware's embodied emissions are spread over [years].
        utilisation: fraction of that life spent serving requests [-].
        wue_l_per_kwh: on-site water usage effectiveness [L per kWh of IT energy].
        offsite_water_l_per_kwh: water consumed generating grid electricity [L/kWh].
    """

    gpu_count: int
    server: ServerProfile
    carbon_intensity_g_per_kwh: Ranged
    pue: Ranged
    gpu_embodied_kg_co2e: Ranged
    lifetime_years: Ranged
    utilisation: Ranged
    wue_l_per_kwh: Ranged
    offsite_water_l_per_kwh: Ranged


@dataclass(frozen=True, slots=True)
class CarbonEstimate:
    """Energy, CO2e and water of one request, each with its bounds.

    Attributes:
        server_overhead_w: non-GPU server power charged to the request [W].
        server_overhead_j: non-GPU server energy charged to the request [J].
        it_j: GPU energy + server_overhead_j [J].
        facility_j: it_j x PUE, energy at the facility meter [J].
        operational_g: facility energy x grid intensity [gCO2e].
        embodied: GPU and server-share manufacturing emissions charged to the request [gCO2e].
        total_g: operational_g + embodied total [gCO2e].
        water: on-site and off-site water consumed [L].
    """

    server_overhead_w: Ranged
    server_overhead_j: Ranged
    it_j: Ranged
    facility_j: Ranged
    operational_g: Ranged
    embodied: EmbodiedCharge
    total_g: Ranged
    water: WaterUse

    @property
    def embodied_g(self) -> Ranged:
        return self.embodied.total_g


def operational_carbon_g(facility_j: float, carbon_intensity_g_per_kwh: float) -> float:
    """Grid emissions [gCO2e] of `facility_j` [J] at an intensity [gCO2e/kWh]."""
    return facility_j / JOULES_PER_KWH * carbon_intensity_g_per_kwh


def operational_g(facility_j: Ranged, carbon_intensity_g_per_kwh: Ranged) -> Ranged:
    """Grid emissions [gCO2e] of `facility_j` [J], bounds of energy and intensity in quadrature."""
    return product(kwh(facility_j), carbon_intensity_g_per_kwh)


@dataclass(frozen=True, slots=True)
class HeldRates:
    """What holding a request's hardware costs per second, whatever the request: the servers'
    non-GPU power [W] and the embodied emissions charged per second held [gCO2e/s]; and, for
    request_carbon, the squared logs of the factors' bound ratios (`log_bounds`: low and high of
    PUE, grid intensity, WUE and grid water, 0 for an exact bound, as `product` takes them)."""

    server_overhead_w: Ranged
    embodied_per_s: EmbodiedCharge
    log_bounds: tuple[float, float, float, float, float, float, float, float]


def _log_bounds(factor: Ranged) -> tuple[float, float]:
    return _log_squared(factor.low_ratio), _log_squared(factor.high_ratio)


def _log_squared(ratio: float) -> float:
    """ln(ratio)^2, the term `product` adds for one factor's bound (none for an exact one)."""
    return 0.0 if ratio == 1.0 else math.log(ratio) ** 2


def held_rates(factors: CarbonFactors) -> HeldRates:
    """The HeldRates of `factors` (requests with equal factors may share them)."""
    return HeldRates(
        server_overhead_power_w(factors.server, factors.gpu_count),
        request_embodied_g(
            factors.gpu_embodied_kg_co2e,
            factors.gpu_count,
            factors.server,
            1.0,
            factors.lifetime_years,
            factors.utilisation,
        ),
        (
            *_log_bounds(factors.pue),
            *_log_bounds(factors.carbon_intensity_g_per_kwh),
            *_log_bounds(factors.wue_l_per_kwh),
            *_log_bounds(factors.offsite_water_l_per_kwh),
        ),
    )


Bounded = tuple[float, float, float]
"""A value [any unit] with its low and high ratios, as a `Ranged` holds them."""


class CarbonFigures(NamedTuple):
    """A request's CO2e and water as plain floats, what `request_carbon` returns as `Ranged`
    values (the quote document reads these; building and checking a dozen `Ranged` per quote
    costs more than its arithmetic). Unbounded members carry the ratios of their `HeldRates`
    (`server_overhead_j`: server_overhead_w's; the embodied charges: embodied_per_s's)."""

    server_overhead_j: float  # [J]
    it_j: Bounded  # [J]
    facility_j: Bounded  # [J]
    operational_g: Bounded  # [gCO2e]
    embodied_gpus_g: float  # [gCO2e]
    embodied_server_g: float  # [gCO2e]
    embodied_g: float  # [gCO2e]
    onsite_l: Bounded  # [L]
    offsite_l: Bounded  # [L]
    total_g: Bounded  # operational + embodied [gCO2e]
    water_l: Bounded  # onsite + offsite [L]


def carbon_figures(
    gpu_j: Ranged, duration_s: float, factors: CarbonFactors, rates: HeldRates
) -> CarbonFigures:
    """CO2e and water of a request whose GPUs use `gpu_j` [J] over `duration_s` [s], as floats
    (`rates`: held_rates(factors)).

    Written out in floats rather than composed from `it_energy_j`, `facility_energy_j`,
    `operational_g`, `request_water` and `total` (a Ranged built and checked per step, the
    constant factors' logs taken again each time): the same operations in the same order, so
    the same numbers to the last bit (tests/core/test_carbon_reference.py holds
    request_carbon, built from these, to that composition)."""
    pue_lo, pue_hi, grid_lo, grid_hi, wue_lo, wue_hi, ewif_lo, ewif_hi = rates.log_bounds
    per_kwh = 1.0 / JOULES_PER_KWH
    overhead_w = rates.server_overhead_w
    overhead_j = overhead_w.value * duration_s
    # IT energy: GPU + server share, bounds added end to end.
    it_value = gpu_j.value + overhead_j
    it_low, it_high = 1.0, 1.0
    if it_value != 0.0:
        gpu_low, gpu_high = gpu_j.value * gpu_j.low_ratio, gpu_j.value * gpu_j.high_ratio
        it_low = min((gpu_low + overhead_j * overhead_w.low_ratio) / it_value, 1.0)
        it_high = max((gpu_high + overhead_j * overhead_w.high_ratio) / it_value, 1.0)
    it_lo, it_hi = _log_squared(it_low), _log_squared(it_high)
    # Facility energy: IT energy x PUE, bounds in quadrature.
    facility_value = it_value * factors.pue.value
    facility_low = math.exp(-math.sqrt(it_lo + pue_lo))
    facility_high = math.exp(math.sqrt(it_hi + pue_hi))
    facility_lo, facility_hi = _log_squared(facility_low), _log_squared(facility_high)
    facility_kwh = facility_value * per_kwh
    operational = (
        facility_kwh * factors.carbon_intensity_g_per_kwh.value,
        math.exp(-math.sqrt(facility_lo + grid_lo)),
        math.exp(math.sqrt(facility_hi + grid_hi)),
    )
    # Embodied charges are linear in the time held (exact factor: bounds unchanged).
    per_s = rates.embodied_per_s
    embodied_g = per_s.total_g.value * duration_s
    onsite = (
        it_value * per_kwh * factors.wue_l_per_kwh.value,
        math.exp(-math.sqrt(it_lo + wue_lo)),
        math.exp(math.sqrt(it_hi + wue_hi)),
    )
    offsite = (
        facility_kwh * factors.offsite_water_l_per_kwh.value,
        math.exp(-math.sqrt(facility_lo + ewif_lo)),
        math.exp(math.sqrt(facility_hi + ewif_hi)),
    )
    return CarbonFigures(
        server_overhead_j=overhead_j,
        it_j=(it_value, it_low, it_high),
        facility_j=(facility_value, facility_low, facility_high),
        operational_g=operational,
        embodied_gpus_g=per_s.gpus_g.value * duration_s,
        embodied_server_g=per_s.server_g.value * duration_s,
        embodied_g=embodied_g,
        onsite_l=onsite,
        offsite_l=offsite,
        total_g=_summed(
            operational, (embodied_g, per_s.total_g.low_ratio, per_s.total_g.high_ratio)
        ),
        water_l=_summed(onsite, offsite),
    )


def _summed(first: Bounded, second: Bounded) -> Bounded:
    """`uncertainty.total` of two terms, in floats (the same operations in the same order)."""
    value = first[0] + second[0]
    if value == 0.0:
        return 0.0, 1.0, 1.0
    low = first[0] * first[1] + second[0] * second[1]
    high = first[0] * first[2] + second[0] * second[2]
    return value, min(low / value, 1.0), max(high / value, 1.0)


def request_carbon(
    gpu_j: Ranged, duration_s: float, factors: CarbonFactors, rates: HeldRates | None = None
) -> CarbonEstimate:
    """CO2e and water of a request whose GPUs use `gpu_j` [J] over `duration_s` [s]
    (`rates`: held_rates(factors) when the caller has it already): `carbon_figures` as
    `Ranged` values."""
    if rates is None:
        rates = held_rates(factors)
    figures = carbon_figures(gpu_j, duration_s, factors, rates)
    overhead_w, per_s = rates.server_overhead_w, rates.embodied_per_s
    return CarbonEstimate(
        server_overhead_w=overhead_w,
        server_overhead_j=Ranged(
            figures.server_overhead_j, overhead_w.low_ratio, overhead_w.high_ratio
        ),
        it_j=Ranged(*figures.it_j),
        facility_j=Ranged(*figures.facility_j),
        operational_g=Ranged(*figures.operational_g),
        embodied=EmbodiedCharge(
            Ranged(figures.embodied_gpus_g, per_s.gpus_g.low_ratio, per_s.gpus_g.high_ratio),
            Ranged(figures.embodied_server_g, per_s.server_g.low_ratio, per_s.server_g.high_ratio),
            Ranged(figures.embodied_g, per_s.total_g.low_ratio, per_s.total_g.high_ratio),
        ),
        total_g=Ranged(*figures.total_g),
        water=WaterUse(
            Ranged(*figures.onsite_l), Ranged(*figures.offsite_l), Ranged(*figures.water_l)
        ),
    )
