"""Water consumed for a request: on site (cooling) and off site (generating its electricity).

Following Li et al. (2023), "Making AI Less 'Thirsty'" (arXiv:2304.03271):

- on-site: the data centre's water usage effectiveness, WUE [L/kWh], is by The Green Grid's
  definition (and AWS's, Microsoft's) litres evaporated for cooling and humidification per kWh of
  *IT* energy, so it multiplies the IT energy (GPUs + server share), not the facility energy;
- off-site: power plants consume water per kWh they generate (the electricity water intensity
  factor, EWIF [L/kWh], of the grid mix), which the whole facility energy draws.

Water here is consumption (withdrawn and not returned), not withdrawal.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.core.facility import kwh
from service.core.uncertainty import Ranged, product, total


@dataclass(frozen=True, slots=True)
class WaterUse:
    """Water consumed for one request [L]: `onsite_l + offsite_l = total_l`."""

    onsite_l: Ranged
    offsite_l: Ranged
    total_l: Ranged


def onsite_water_l(it_j: Ranged, wue_l_per_kwh: Ranged) -> Ranged:
    """Cooling water [L] evaporated on site for `it_j` [J] of IT energy at a WUE [L/kWh]."""
    return product(kwh(it_j), wue_l_per_kwh)


def offsite_water_l(facility_j: Ranged, offsite_water_l_per_kwh: Ranged) -> Ranged:
    """Water [L] consumed generating `facility_j` [J] at the grid's EWIF [L/kWh]."""
    return product(kwh(facility_j), offsite_water_l_per_kwh)


def request_water(
    it_j: Ranged, facility_j: Ranged, wue_l_per_kwh: Ranged, offsite_water_l_per_kwh: Ranged
) -> WaterUse:
    """On-site plus off-site water [L] of a request (bounds of the two added end to end)."""
    onsite = onsite_water_l(it_j, wue_l_per_kwh)
    offsite = offsite_water_l(facility_j, offsite_water_l_per_kwh)
    return WaterUse(onsite, offsite, total(onsite, offsite))
