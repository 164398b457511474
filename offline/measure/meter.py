"""GPU energy and power from NVML, read on exactly the GPUs torch computes on.

Energy: ``nvmlDeviceGetTotalEnergyConsumption`` (Volta and later; millijoules since the driver
loaded), the counter Zeus and ML.ENERGY read; a phase's energy is the counter's difference
around it, synchronised with the GPU, summed over the plan's GPUs.

Which NVML device is torch's ``cuda:i``: NVML numbers GPUs in PCI bus order over the whole
machine, CUDA numbers them fastest-first (unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``) and only
those ``CUDA_VISIBLE_DEVICES`` leaves, so the indices need not agree. Each torch device is
matched to its NVML handle by UUID (torch's device properties carry it), else by PCI bus id;
a device matched by neither is refused rather than guessed. nvidia-ml-py is imported only
when a meter is opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class NoGpu(RuntimeError):
    """No NVIDIA GPU can be measured here (no NVML, no driver, no device, no match)."""


class EnergyMeter(Protocol):
    """Reads a monotonically increasing energy counter [J]."""

    name: str

    def read_j(self) -> float: ...


@dataclass(frozen=True, slots=True)
class TorchDevice:
    """What torch says about ``cuda:index``: its UUID and PCI bus id where it reports them."""

    index: int
    uuid: str | None
    pci_bus_id: str | None


def normal_uuid(uuid: str) -> str:
    """A GPU UUID without NVML's ``GPU-`` prefix, lower case (torch reports it bare)."""
    text = uuid.strip().lower()
    return text.removeprefix("gpu-")


def normal_pci_bus_id(bus_id: str) -> tuple[int, int, int]:
    """(domain, bus, device) of ``"00000000:1B:00.0"`` or ``"0000:1b:00"``: NVML pads the
    domain to eight hex digits, CUDA to four."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_handles(nvml: Any, devices: Sequence[TorchDevice]) -> list[Any]:
    """The NVML handle of each torch device, in `devices`' order; NoGpu naming a device that
    no NVML GPU matches (by UUID, else PCI bus id) or two devices on one GPU."""
    by_uuid: dict[str, Any] = {}
    by_bus: dict[tuple[int, int, int], Any] = {}
    for i in range(int(nvml.nvmlDeviceGetCount())):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        by_uuid[normal_uuid(_text(nvml.nvmlDeviceGetUUID(handle)))] = handle
        by_bus[normal_pci_bus_id(_text(nvml.nvmlDeviceGetPciInfo(handle).busId))] = handle
    handles: list[Any] = []
    for device in devices:
        handle = None
        if device.uuid:
            handle = by_uuid.get(normal_uuid(device.uuid))
        if handle is None and device.pci_bus_id:
            handle = by_bus.get(normal_pci_bus_id(device.pci_bus_id))
        if handle is None:
            raise NoGpu(
                f"no NVIDIA GPU/NVML matches cuda:{device.index} (uuid {device.uuid}, "
                f"PCI {device.pci_bus_id}): refusing to meter a GPU torch does not use"
            )
        if any(handle is h for h in handles):
            raise NoGpu(f"cuda:{device.index} is the same GPU as another device of the plan")
        handles.append(handle)
    return handles


INSTANT_POWER_FIELD = 186
"""NVML_FI_DEV_POWER_INSTANT (nvml.h): the board's power now [mW]. nvmlDeviceGetPowerUsage
averages over one second on Ampere and newer GPUs (NVML API reference), too slow for a
kernel loop's trace; it is the fallback where the field is not supported."""


class NvmlMeter:
    """The total-energy counters of the GPUs a configuration runs on, summed [J]; their
    board power now, summed [W] (`power_source` says which NVML reading)."""

    def __init__(self, nvml: Any, handles: Sequence[Any], name: str) -> None:
        self._nvml = nvml
        self._handles = tuple(handles)
        self.name = name
        self.power_source = "nvml-field-power-instant"

    @property
    def gpu_count(self) -> int:
        return len(self._handles)

    def read_j(self) -> float:
        read = self._nvml.nvmlDeviceGetTotalEnergyConsumption
        return sum(float(read(h)) for h in self._handles) / 1000.0

    def power_w(self) -> float:
        return sum(self._power_mw(h) for h in self._handles) / 1000.0

    def _power_mw(self, handle: Any) -> float:
        if self.power_source == "nvml-field-power-instant":
            try:
                value = self._nvml.nvmlDeviceGetFieldValues(handle, [INSTANT_POWER_FIELD])[0]
                if value.nvmlReturn == 0:
                    return float(value.value.uiVal)
            except (AttributeError, getattr(self._nvml, "NVMLError", RuntimeError)):
                pass
            self.power_source = "nvmlDeviceGetPowerUsage (1 s average)"  # said in provenance
        return float(self._nvml.nvmlDeviceGetPowerUsage(handle))

    def facts(self) -> dict[str, Any]:
        """Driver version, power limit [W] and UUID of each GPU, for provenance."""
        nvml = self._nvml
        return {
            "driver": _text(nvml.nvmlSystemGetDriverVersion()),
            "power_limit_w": [
                nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0 for h in self._handles
            ],
            "uuids": [_text(nvml.nvmlDeviceGetUUID(h)) for h in self._handles],
        }


def torch_devices(count: int) -> list[TorchDevice]:
    """``cuda:0`` .. ``cuda:count-1`` as torch sees them (after CUDA_VISIBLE_DEVICES)."""
    import torch

    out = []
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        uuid = getattr(props, "uuid", None)
        bus = None
        if hasattr(props, "pci_bus_id"):  # the fields torch's CUDA device properties carry
            domain, slot = getattr(props, "pci_domain_id", 0), getattr(props, "pci_device_id", 0)
            bus = f"{int(domain):04x}:{int(props.pci_bus_id):02x}:{int(slot):02x}.0"
        out.append(TorchDevice(index, str(uuid) if uuid is not None else None, bus))
    return out


def meter_on(nvml: Any, devices: Sequence[TorchDevice]) -> NvmlMeter:
    """A meter summing the GPUs of `devices` (NoGpu when one is missing or has no counter)."""
    handles = nvml_handles(nvml, devices)
    names = {_text(nvml.nvmlDeviceGetName(h)) for h in handles}
    for handle in handles:
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # refuses GPUs without the counter
    label = " + ".join(sorted(names))
    return NvmlMeter(nvml, handles, label if len(handles) == 1 else f"{len(handles)} x {label}")


def open_nvml_meter(devices: Sequence[TorchDevice]) -> NvmlMeter:
    """A meter on the GPUs torch uses as `devices`; NoGpu saying why when there is none."""
    try:
        import pynvml  # nvidia-ml-py, the `measure` extra
    except ImportError:
        raise NoGpu(
            "no NVIDIA GPU/NVML: nvidia-ml-py is not installed (pip install '.[measure]')"
        ) from None
    try:
        pynvml.nvmlInit()
        return meter_on(pynvml, devices)
    except pynvml.NVMLError as error:
        raise NoGpu(f"no NVIDIA GPU/NVML: {error}") from None
