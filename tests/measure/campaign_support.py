"""Hand-built measurement campaigns for the tests of the campaign's readers: a power trace of
known time-weighted mean, and a campaign folder written by the harness's own writer with the
provenance document a real run records."""

from __future__ import annotations

from pathlib import Path

from offline.measure.budget import CampaignRun
from offline.measure.campaign import provenance
from offline.measure.campaign_output import write_campaign

H100_FACTS = {"driver": "570.86.15", "power_limit_w": [700.0], "uuids": ["GPU-1"]}
H200_FACTS = {"driver": "580", "power_limit_w": [700.0], "uuids": ["GPU-1"]}


def alternating_trace(item: str, mean_w: float, updates: int = 10) -> list[dict[str, object]]:
    """Samples every 50 ms of a meter that updates every 100 ms, alternating mean - 10 W and
    mean + 10 W: `updates` updates, whose time-weighted mean is `mean_w` for an even count."""
    return [
        {"item": item, "t_s": 0.05 * i, "power_w": mean_w + (10.0 if (i // 2) % 2 else -10.0)}
        for i in range(2 * updates + 1)
    ]


def write_test_campaign(
    folder: Path,
    run: CampaignRun,
    *,
    gpu: str = "H200-SXM-141GB",
    gpu_name: str = "NVIDIA H200",
    torch_version: str = "2.11.0",
    cuda_version: str = "13.0",
    elapsed_s: float = 1.0,
) -> Path:
    """Writes `run` to `folder` as the harness does, with an 8-minute budget's provenance."""
    document = provenance(
        gpu=gpu,
        gpu_name=gpu_name,
        facts=H100_FACTS if gpu.startswith("H100") else H200_FACTS,
        torch_version=torch_version,
        cuda_version=cuda_version,
        budget_s=450.0,
        elapsed_s=elapsed_s,
        power_source="nvml-field-power-instant",
        argv=["--out", folder.name],
    )
    write_campaign(folder, run, document)
    return folder
