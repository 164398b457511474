"""Embodied carbon: the request's share of the manufacturing emissions of the hardware it holds.

Hardware made once is used for `lifetime_years`, of which a fraction `utilisation` is spent
serving requests (the rest idle, in maintenance or unallocated). A request that holds the hardware
for `duration_s` is charged `duration_s / (lifetime_s * utilisation)` of its embodied emissions:
the time share of the GSF SCI specification (`M = TE x TiR / EL`), with idle time spread over the
requests that are served. The held hardware is `gpu_count` GPUs plus the same share of their
servers' non-GPU parts as in the energy account (`gpu_count / gpus_per_server` servers).
"""

from __future__ import annotations

from dataclasses import dataclass

from service.core.facility import ServerProfile
from service.core.uncertainty import Ranged, product, total

SECONDS_PER_YEAR = 365.25 * 24 * 3600.0
GRAMS_PER_KG = 1000.0


def amortised_share(duration_s: float, lifetime_years: float, utilisation: float = 1.0) -> float:
    """Fraction [-] of hardware's embodied emissions charged to `duration_s` [s] of use, for a
    `lifetime_years` [years] service life spent `utilisation` [-] of the time serving."""
    if lifetime_years <= 0.0 or not 0.0 < utilisation <= 1.0:
        raise ValueError("lifetime_years must be > 0 and utilisation in (0, 1]")
    return duration_s / (lifetime_years * SECONDS_PER_YEAR * utilisation)


def embodied_carbon_g(
    embodied_kg_co2e: float, duration_s: float, lifetime_years: float, utilisation: float = 1.0
) -> float:
    """Share [gCO2e] of `embodied_kg_co2e` [kgCO2e] charged to `duration_s` [s] of use."""
    return (
        embodied_kg_co2e * GRAMS_PER_KG * amortised_share(duration_s, lifetime_years, utilisation)
    )


def held_gpu_embodied_kg(gpu_embodied_kg_co2e: Ranged, gpu_count: int) -> Ranged:
    """Manufacturing emissions [kgCO2e] of `gpu_count` GPUs of `gpu_embodied_kg_co2e` each."""
    return gpu_embodied_kg_co2e.scaled(gpu_count)


def held_server_embodied_kg(profile: ServerProfile, gpu_count: int) -> Ranged:
    """Manufacturing emissions [kgCO2e] of the non-GPU server share `gpu_count` GPUs hold."""
    return profile.non_gpu_embodied_kg_co2e.scaled(profile.share(gpu_count))


def amortised_embodied_g(
    held_kg_co2e: Ranged, duration_s: float, lifetime_years: Ranged, utilisation: Ranged
) -> Ranged:
    """Share [gCO2e] of `held_kg_co2e` [kgCO2e] charged to `duration_s` [s]: a longer lifetime or
    a higher utilisation lowers it, so their high bounds give the charge's low bound."""
    rate = held_kg_co2e.scaled(GRAMS_PER_KG * duration_s / SECONDS_PER_YEAR)
    return product(rate, lifetime_years.inverse(), utilisation.inverse())


@dataclass(frozen=True, slots=True)
class EmbodiedCharge:
    """Embodied emissions charged to one request [gCO2e].

    Attributes:
        gpus_g: share of the held GPUs' manufacturing emissions.
        server_g: share of the held servers' non-GPU manufacturing emissions.
        total_g: gpus_g + server_g; its bounds add the two hardware figures' bounds end to end,
            then take lifetime and utilisation in quadrature once.
    """

    gpus_g: Ranged
    server_g: Ranged
    total_g: Ranged


def request_embodied_g(
    gpu_embodied_kg_co2e: Ranged,
    gpu_count: int,
    profile: ServerProfile,
    duration_s: float,
    lifetime_years: Ranged,
    utilisation: Ranged,
) -> EmbodiedCharge:
    """Embodied emissions [gCO2e] of `gpu_count` GPUs and their server share held `duration_s`."""
    gpus_kg = held_gpu_embodied_kg(gpu_embodied_kg_co2e, gpu_count)
    server_kg = held_server_embodied_kg(profile, gpu_count)

    def charge(kg: Ranged) -> Ranged:
        return amortised_embodied_g(kg, duration_s, lifetime_years, utilisation)

    return EmbodiedCharge(charge(gpus_kg), charge(server_kg), charge(total(gpus_kg, server_kg)))
