"""Energy at the facility meter: the GPUs, the rest of their server, and the building around it.

A request holds `gpu_count` GPUs of servers that carry `gpus_per_server` each. Besides the GPUs'
own energy (what NVML reads) each server draws power for CPUs, memory, NICs, switches, storage,
fans and power-supply losses; the request is charged that non-GPU power in proportion to the GPUs
it holds, for as long as it holds them. The building (cooling, power distribution, lighting)
multiplies the IT energy by the PUE.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.core.uncertainty import Ranged, product, total

JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """The non-GPU part of a GPU server.

    Attributes:
        gpus_per_server: GPUs one server carries [-].
        non_gpu_power_w: power of everything but the GPUs while serving [W per server].
        non_gpu_embodied_kg_co2e: manufacturing emissions of everything but the GPUs
            [kgCO2e per server].
    """

    gpus_per_server: int
    non_gpu_power_w: Ranged
    non_gpu_embodied_kg_co2e: Ranged

    def __post_init__(self) -> None:
        if self.gpus_per_server < 1:
            raise ValueError("gpus_per_server must be >= 1")

    def share(self, gpu_count: int) -> float:
        """Servers' worth [-] that `gpu_count` GPUs hold (2 of 8 -> 0.25; 16 of 8 -> 2)."""
        return gpu_count / self.gpus_per_server


def server_overhead_power_w(profile: ServerProfile, gpu_count: int) -> Ranged:
    """Non-GPU server power [W] charged to a request holding `gpu_count` GPUs."""
    return profile.non_gpu_power_w.scaled(profile.share(gpu_count))


def server_overhead_j(profile: ServerProfile, gpu_count: int, duration_s: float) -> Ranged:
    """Non-GPU server energy [J] of holding `gpu_count` GPUs for `duration_s` [s]."""
    return server_overhead_power_w(profile, gpu_count).scaled(duration_s)


def it_energy_j(gpu_j: Ranged, overhead_j: Ranged) -> Ranged:
    """IT energy [J]: the GPUs' energy plus the server's non-GPU share (bounds added)."""
    return total(gpu_j, overhead_j)


def facility_energy_j(it_j: Ranged, pue: Ranged) -> Ranged:
    """Energy at the facility meter [J] for `it_j` [J] of IT energy under a PUE [-]."""
    return product(it_j, pue)


def kwh(energy_j: Ranged) -> Ranged:
    """`energy_j` [J] in kWh."""
    return energy_j.scaled(1.0 / JOULES_PER_KWH)
