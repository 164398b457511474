"""One device per GPU of the plan, metered on exactly the GPUs torch computes on.

`FakeNvml` is a test double for NVML, whose hardware is absent on this machine: it answers the
five calls the meter makes the way nvidia-ml-py does (handles, UUIDs with NVML's "GPU-"
prefix, PCI bus ids with an eight-digit domain, the energy counter in millijoules). Everything
else (torch, the plan, the request the service quotes) is the real part.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from offline.measure.meter import NoGpu, TorchDevice, meter_on, nvml_handles
from offline.measure.plan import PlannedConfiguration, harness_request
from offline.measure.workload import (
    band_mask,
    build_runners,
    first_key,
    is_sliding_layer,
    stage_of_layer,
)
from service.catalog.models import load_model_catalog
from service.schemas.estimate_request import EstimateRequest


@dataclass
class FakeGpu:
    uuid: str
    bus_id: str
    energy_mj: int
    name: str = "NVIDIA H100 80GB HBM3"


@dataclass
class PciInfo:
    busId: str  # noqa: N815 - nvidia-ml-py's field name


class FakeNvml:
    """Four GPUs in NVML's (PCI) order; a handle is the GPU itself."""

    def __init__(self) -> None:
        self.gpus = [
            FakeGpu(f"GPU-0000000{i}-aaaa-bbbb-cccc-00000000000{i}", f"00000000:{b}:00.0", e)
            for i, (b, e) in enumerate([("1B", 1000), ("3D", 20000), ("9A", 300000), ("C1", 4)])
        ]

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 - nvidia-ml-py's names
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:  # noqa: N802
        return self.gpus[i]

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> str:  # noqa: N802
        return gpu.uuid

    def nvmlDeviceGetPciInfo(self, gpu: FakeGpu) -> PciInfo:  # noqa: N802
        return PciInfo(gpu.bus_id.encode())  # type: ignore[arg-type]  # bytes, as old bindings

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> str:  # noqa: N802
        return gpu.name

    def nvmlDeviceGetTotalEnergyConsumption(self, gpu: FakeGpu) -> int:  # noqa: N802
        return gpu.energy_mj


def test_torch_devices_are_matched_by_uuid_whatever_their_order() -> None:
    # CUDA_VISIBLE_DEVICES=2,0: torch's cuda:0 is NVML's GPU 2, cuda:1 NVML's GPU 0. torch
    # reports the UUID without "GPU-" and may differ in case.
    nvml = FakeNvml()
    devices = [
        TorchDevice(0, "00000002-AAAA-bbbb-cccc-000000000002", None),
        TorchDevice(1, "00000000-aaaa-bbbb-cccc-000000000000", None),
    ]
    assert nvml_handles(nvml, devices) == [nvml.gpus[2], nvml.gpus[0]]
    meter = meter_on(nvml, devices)
    # 300000 mJ + 1000 mJ: the two GPUs torch uses, never NVML's 0 and 1 (21 J).
    assert meter.read_j() == pytest.approx(301.0)
    assert meter.gpu_count == 2 and meter.name == "2 x NVIDIA H100 80GB HBM3"
    nvml.gpus[2].energy_mj += 5500
    assert meter.read_j() == pytest.approx(306.5)


def test_pci_bus_id_is_the_fallback_across_domain_widths() -> None:
    # NVML pads the PCI domain to eight hex digits ("00000000:3D:00.0"), CUDA to four.
    nvml = FakeNvml()
    assert nvml_handles(nvml, [TorchDevice(0, None, "0000:3d:00.0")]) == [nvml.gpus[1]]


def test_a_device_no_gpu_matches_or_two_devices_on_one_gpu_are_refused() -> None:
    nvml = FakeNvml()
    with pytest.raises(NoGpu, match="no NVIDIA GPU/NVML matches cuda:0"):
        nvml_handles(nvml, [TorchDevice(0, "ffffffff-0000-0000-0000-000000000000", None)])
    with pytest.raises(NoGpu, match="no NVIDIA GPU/NVML matches cuda:1"):
        nvml_handles(nvml, [TorchDevice(0, None, "0000:1b:00.0"), TorchDevice(1, None, None)])
    with pytest.raises(NoGpu, match="same GPU"):
        nvml_handles(
            nvml, [TorchDevice(0, None, "0000:1b:00.0"), TorchDevice(1, None, "0000:1B:00.0")]
        )


def planned(count: int, **request: Any) -> PlannedConfiguration:
    body = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "workload": {"batch_size": 4, "prompt_tokens": 128, "output_tokens": 16},
        "hardware": {"gpu": "H100-SXM5-80GB", "count": count},
        **request,
    }
    return PlannedConfiguration("c", body["model"], 0, 4, 128, 16, "H100-SXM5-80GB", count, body)


def h100s(count: int, **parallelism: int) -> dict[str, Any]:
    return {"gpu": "H100-SXM5-80GB", "count": count, "parallelism": parallelism}


def test_the_request_prices_what_the_harness_runs() -> None:
    one = harness_request(planned(1), "2.13.0+cu128")
    assert isinstance(one, dict)
    assert one["serving"] == {"engine": "hf-transformers", "engine_version": "2.13.0+cu128"}
    assert "parallelism" not in one["hardware"]
    # Two GPUs: layers split in two stages, so the quote is pipeline 2, not tensor 2.
    two = harness_request(planned(2), "2.13.0")
    assert isinstance(two, dict)
    assert two["hardware"]["parallelism"] == {"tensor": 1, "pipeline": 2}
    for request in (one, two):
        EstimateRequest.model_validate(request)  # the service can quote it
    explicit = planned(2, hardware=h100s(2, pipeline=2))
    assert isinstance(harness_request(explicit, "2.13.0"), dict)


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (planned(1, serving={"engine": "vllm"}), "engine vllm"),
        (planned(2, hardware=h100s(2, tensor=2)), "'tensor': 2"),
        (planned(4, hardware=h100s(4, pipeline=2)), "'pipeline': 2"),
    ],
)
def test_what_the_harness_cannot_run_is_refused(config: PlannedConfiguration, reason: str) -> None:
    refused = harness_request(config, "2.13.0")
    assert isinstance(refused, str) and reason in refused


def test_layers_split_into_contiguous_stages() -> None:
    assert [stage_of_layer(i, 5, 2) for i in range(5)] == [0, 0, 0, 1, 1]
    assert [stage_of_layer(i, 32, 4) for i in range(32)] == [s for s in range(4) for _ in range(8)]
    # Gemma 3 4B: 29 of 34 layers slide.
    assert sum(is_sliding_layer(i, 34, 29) for i in range(34)) == 29
    assert [is_sliding_layer(i, 6, 5) for i in range(6)] == [False, True, True, True, True, True]


def test_band_mask_and_window_start_by_hand() -> None:
    # A decode step at position 10 with a window of 4 attends positions 7..10.
    assert first_key(10, 1, 4) == 7
    assert first_key(2, 1, 4) == 0 and first_key(10, 1, None) == 0
    assert first_key(0, 12, 4) == 0  # a prefill keeps every key; the band mask limits it
    pytest.importorskip("torch")
    # Queries at positions 2, 3, 4 of 5 keys, window 2: each sees itself and the key before.
    assert band_mask(3, 5, 2).int().tolist() == [
        [0, 1, 1, 0, 0],
        [0, 0, 1, 1, 0],
        [0, 0, 0, 1, 1],
    ]


def test_a_model_split_over_two_devices_and_a_sliding_window_runs() -> None:
    pytest.importorskip("torch")
    tiny = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}
    tiny |= {"head_dim": 16, "intermediate_size": 128, "vocab_size": 300, "num_layers": 3}
    gemma = replace(
        load_model_catalog().get("google/gemma-3-4b-it").require_architecture(),
        **tiny,
        sliding_window_tokens=4,
        num_sliding_window_layers=2,
    )
    runners = build_runners(gemma, 2, 12, 3, devices=["cpu", "cpu"], dtype_name="float32")
    runners.together()  # prefill through the band mask, decode past the window
    runners.synchronize()
    runners.release()
