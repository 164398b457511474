"""Resolve a request's datacenter fields into the core's carbon factors, and report them.

Each factor is the caller's value when the request gives one (used exactly, no band) or a
catalogue default with its band and source: grid intensity from the region (or the world average),
PUE and on-site WUE from the region's operator (cloud provider, else the industry average),
off-site water from the region's country, the non-GPU server share from the GPU's server profile,
and embodied figures from the GPU catalogue and the server catalogue's amortisation defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.catalog.facilities import FacilityCatalog
from service.catalog.figures import RangeRatios, SourcedFigure
from service.catalog.gpus import GpuRecord
from service.catalog.regions import RegionRecord
from service.catalog.servers import ServerCatalog
from service.core.carbon import CarbonFactors, CarbonFigures, HeldRates
from service.core.uncertainty import Ranged
from service.db.quote_document import CarbonFactorSet
from service.schemas.estimate_request import DatacenterIn
from service.schemas.estimate_response import CarbonFactorOut

FALLBACK_EMBODIED_METHOD = "llmcarbon-die-area"  # widest band, for a method no band describes


@dataclass(frozen=True, slots=True)
class FactorNote:
    """Unit, provenance and whether a factor was defaulted (False: given in the request)."""

    unit: str
    defaulted: bool
    source: str


@dataclass(slots=True)
class CarbonInputs:
    """The core's factors for one request, plus what a bill needs to explain them.

    `priced_parts` is for the estimator: what it derives from these inputs for every quote
    (their factors serialised, the held hardware's rates), kept here once made, so that every
    request of a remembered context shares them."""

    factors: CarbonFactors
    region: str | None
    intensity_source: str
    embodied_method: str
    notes: dict[str, FactorNote] = field(default_factory=dict)
    priced_parts: tuple[CarbonFactorSet, HeldRates] | None = field(
        default=None, compare=False, repr=False
    )


@dataclass(slots=True)
class _Builder:
    datacenter: DatacenterIn
    defaulted: dict[str, Any]
    notes: dict[str, FactorNote] = field(default_factory=dict)

    def given_or(self, name: str, unit: str, figure: SourcedFigure, label: str) -> Ranged:
        """The request's `datacenter.<name>` exactly, else `figure` (recorded as defaulted)."""
        given = getattr(self.datacenter, name)
        if given is not None:
            self.notes[name] = FactorNote(unit, False, f"given in the request (datacenter.{name})")
            return Ranged(float(given))
        self.defaulted[f"datacenter.{name}"] = figure.value
        self.notes[name] = FactorNote(unit, True, f"{label}: {figure.source}")
        return figure.ranged()

    def default(self, name: str, unit: str, value: Ranged, source: str) -> Ranged:
        self.notes[name] = FactorNote(unit, True, source)
        return value


def resolve_carbon_inputs(
    datacenter: DatacenterIn | None,
    region: RegionRecord | None,
    gpu: GpuRecord,
    gpu_count: int,
    facilities: FacilityCatalog,
    servers: ServerCatalog,
    defaulted: dict[str, Any],
) -> CarbonInputs:
    """Every carbon factor of a request on `gpu_count` x `gpu` in `region` (None: unknown)."""
    build = _Builder(datacenter or DatacenterIn(), defaulted)
    explicit = build.datacenter.carbon_intensity_g_per_kwh
    if explicit is not None:
        intensity = Ranged(explicit)
        intensity_source = "explicit carbon_intensity_g_per_kwh"
        build.notes["carbon_intensity_g_per_kwh"] = FactorNote("gCO2e/kWh", False, intensity_source)
    else:
        assert region is not None  # resolve.py falls back to the default region
        band = facilities.intensity_band(region.basis)
        intensity = band.around(region.carbon_intensity_g_per_kwh)
        intensity_source = f"region {region.code} ({region.year}, {region.basis}): {region.source}"
        build.notes["carbon_intensity_g_per_kwh"] = FactorNote(
            "gCO2e/kWh", True, f"{intensity_source}; band: {band.reason}"
        )
    operator = region.provider if region else None
    pue_key, pue_figure = facilities.pue(operator)
    wue_key, wue_figure = facilities.wue_l_per_kwh(operator)
    pue = build.given_or("pue", "-", pue_figure, f"fleet PUE of operator '{pue_key}'")
    wue = build.given_or(
        "wue_l_per_kwh", "L per kWh of IT energy", wue_figure, f"on-site WUE of '{wue_key}'"
    )
    lifetime = build.given_or(
        "lifetime_years", "years", servers.lifetime_years, "default hardware lifetime"
    )
    utilisation = build.given_or(
        "utilisation", "-", servers.utilisation, "default share of lifetime spent serving"
    )
    country = region.country if region else ""
    water_key, water_l_per_kwh = facilities.offsite_water_l_per_kwh(country)
    water_band = facilities.offsite_water_band
    offsite = build.default(
        "offsite_water_l_per_kwh",
        "L/kWh",
        water_band.around(water_l_per_kwh),
        f"grid water consumption of {water_key}: {water_band.reason}",
    )
    server, fallback = servers.for_gpu(gpu.id)
    profile_text = f"server profile '{server.id}' ({server.gpus_per_server} GPUs per server)"
    if fallback:
        profile_text += f"; {gpu.id} is in no profile, the default one was used"
    build.default(
        "server_non_gpu_power_w",
        "W per server",
        server.non_gpu_power_w.ranged(),
        f"{profile_text}: {server.non_gpu_power_w.source}",
    )
    build.default(
        "server_embodied_kg_co2e",
        "kgCO2e per server (non-GPU parts)",
        server.non_gpu_embodied_kg_co2e.ranged(),
        f"{profile_text}: {server.non_gpu_embodied_kg_co2e.source}",
    )
    method = str(gpu.raw.get("embodied_method", FALLBACK_EMBODIED_METHOD))
    band = _embodied_band(servers, method)
    gpu_embodied = build.default(
        "gpu_embodied_kg_co2e",
        "kgCO2e per GPU",
        band.around(gpu.embodied_kg_co2e),
        f"{gpu.id}, method {method} (band: {band.reason}): "
        f"{gpu.sources.get('embodied_kg_co2e', 'gpus.json')}",
    )
    factors = CarbonFactors(
        gpu_count=gpu_count,
        server=server.profile(),
        carbon_intensity_g_per_kwh=intensity,
        pue=pue,
        gpu_embodied_kg_co2e=gpu_embodied,
        lifetime_years=lifetime,
        utilisation=utilisation,
        wue_l_per_kwh=wue,
        offsite_water_l_per_kwh=offsite,
    )
    code = region.code if region else None
    return CarbonInputs(factors, code, intensity_source, method, build.notes)


def _embodied_band(servers: ServerCatalog, method: str) -> RangeRatios:
    if method in servers.embodied_methods:
        return servers.gpu_embodied_band(method)
    return servers.gpu_embodied_band(FALLBACK_EMBODIED_METHOD)


def carbon_factors_out(inputs: CarbonInputs) -> dict[str, CarbonFactorOut]:
    """The carbon block's `factors`: every factor with its bounds, unit and source."""
    f = inputs.factors
    values: dict[str, Ranged] = {
        "carbon_intensity_g_per_kwh": f.carbon_intensity_g_per_kwh,
        "pue": f.pue,
        "server_non_gpu_power_w": f.server.non_gpu_power_w,
        "server_embodied_kg_co2e": f.server.non_gpu_embodied_kg_co2e,
        "gpu_embodied_kg_co2e": f.gpu_embodied_kg_co2e,
        "lifetime_years": f.lifetime_years,
        "utilisation": f.utilisation,
        "wue_l_per_kwh": f.wue_l_per_kwh,
        "offsite_water_l_per_kwh": f.offsite_water_l_per_kwh,
    }
    factors = {
        name: CarbonFactorOut(
            value=value.value,
            low=value.low,
            high=value.high,
            unit=inputs.notes[name].unit,
            defaulted=inputs.notes[name].defaulted,
            source=inputs.notes[name].source,
        )
        for name, value in values.items()
    }
    return factors


def carbon_members(inputs: CarbonInputs, carbon: CarbonFigures, rates: HeldRates) -> dict[str, Any]:
    """The response's carbon block (`CarbonOut`'s members, in its order) as plain values:
    totals with bands (`carbon`, priced with `rates`) and the factors' central values;
    `factors` is None, standing for carbon_factors_out(inputs), which the caller serialises
    once per context."""
    f = inputs.factors
    operational_g, operational_low, operational_high = carbon.operational_g
    total_g, total_low, total_high = carbon.total_g
    water_l, water_low, water_high = carbon.water_l
    embodied_g, embodied = carbon.embodied_g, rates.embodied_per_s.total_g
    return {
        "operational_g": operational_g,
        "embodied_g": embodied_g,
        "total_g": total_g,
        "total_g_low": total_g * total_low,
        "total_g_high": total_g * total_high,
        "carbon_intensity_g_per_kwh": f.carbon_intensity_g_per_kwh.value,
        "pue": f.pue.value,
        "region": inputs.region,
        "carbon_intensity_source": inputs.intensity_source,
        "operational_g_low": operational_g * operational_low,
        "operational_g_high": operational_g * operational_high,
        "embodied_g_low": embodied_g * embodied.low_ratio,
        "embodied_g_high": embodied_g * embodied.high_ratio,
        "embodied_gpu_g": carbon.embodied_gpus_g,
        "embodied_server_g": carbon.embodied_server_g,
        "embodied_method": inputs.embodied_method,
        "server_overhead_w": rates.server_overhead_w.value,
        "lifetime_years": f.lifetime_years.value,
        "utilisation": f.utilisation.value,
        "water_l": water_l,
        "water_l_low": water_l * water_low,
        "water_l_high": water_l * water_high,
        "factors": None,
    }
