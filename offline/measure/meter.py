"""GPU energy from NVML's total-energy counter (millijoules since the driver loaded).

``nvmlDeviceGetTotalEnergyConsumption`` (Volta and later) is the counter Zeus and ML.ENERGY
read; the energy of a phase is the counter's difference around it, synchronised with the GPU.
nvidia-ml-py is imported here only, when a meter is opened.
"""

from __future__ import annotations

from typing import Any, Protocol


class NoGpu(RuntimeError):
    """No NVIDIA GPU can be measured here (no NVML, no driver, no device)."""


class EnergyMeter(Protocol):
    """Reads a monotonically increasing energy counter [J]."""

    name: str

    def read_j(self) -> float: ...


class NvmlMeter:
    """The total-energy counter of one NVIDIA GPU."""

    def __init__(self, nvml: Any, handle: Any, name: str) -> None:
        self._nvml = nvml
        self._handle = handle
        self.name = name

    def read_j(self) -> float:
        return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / 1000.0


def open_nvml_meter(device_index: int = 0) -> NvmlMeter:
    """A meter on GPU `device_index`; NoGpu saying why when there is none to measure."""
    try:
        import pynvml  # nvidia-ml-py, the `measure` extra
    except ImportError:
        raise NoGpu(
            "no NVIDIA GPU/NVML: nvidia-ml-py is not installed (pip install '.[measure]')"
        ) from None
    try:
        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() <= device_index:
            raise NoGpu(f"no NVIDIA GPU/NVML: no GPU with index {device_index}")
        handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        name = pynvml.nvmlDeviceGetName(handle)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # refuses GPUs without the counter
    except pynvml.NVMLError as error:
        raise NoGpu(f"no NVIDIA GPU/NVML: {error}") from None
    return NvmlMeter(pynvml, handle, name if isinstance(name, str) else name.decode())
