"""``python -m offline.measure.campaign --out DIR [--budget-s 450]``: the 8-minute campaign.

On one NVIDIA GPU (torch's ``cuda:0``; pick it with CUDA_VISIBLE_DEVICES), metered by NVML on
that same GPU: per-kernel power curves (offline.measure.campaign_kernels), then random-weight
models end to end (campaign_models), inside `--budget-s` seconds of measuring (the default
leaves about 30 s of the 8 minutes for start-up and writing). Items whose planned time would
overrun are skipped and listed. Writes the files of offline.measure.campaign_output.
``--plan GPU_ID`` only lists the items and their planned times for a catalogue GPU (no GPU
needed). Exit codes: 0 written, 2 no NVIDIA GPU/NVML, or a GPU the catalogue does not know.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from offline.measure.budget import Item, run_within_budget
from offline.measure.campaign_kernels import KernelContext, kernel_items
from offline.measure.campaign_models import PLAN_METER_PERIOD_S, model_items
from offline.measure.campaign_output import write_campaign
from offline.measure.meter import NoGpu, open_nvml_meter, torch_devices
from offline.measure.plan import HARNESS_ENGINE
from offline.measure.power_trace import MeterPeriod
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.gpus import UnknownGpu

EXIT_NO_GPU = 2
DEFAULT_BUDGET_S = 450.0


class PlanOnly:
    """The meter of a `--plan` listing, where nothing is measured."""

    name = "planning only"

    def read_j(self) -> float:
        raise RuntimeError("a --plan listing measures nothing")

    def power_w(self) -> float:
        raise RuntimeError("a --plan listing measures nothing")


def campaign_items(
    meter: Any, gpu_id: str, device: str, loop_s: float, period: MeterPeriod
) -> list[Item]:
    """Kernels first (cheap, the power curves; their traces show `period`), then the models,
    shape by shape, metered over spans of that period."""
    spec = load_gpu_catalog().get(gpu_id).spec

    def synchronize() -> None:
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(device)

    ctx = KernelContext(device, meter, synchronize, period, loop_s=loop_s)
    models = model_items(load_model_catalog(), device=device, meter=meter, gpu=spec, period=period)
    return kernel_items(ctx) + models


def git_commit() -> str:
    """HEAD of the checkout, else ``CAMPAIGN_GIT_COMMIT`` (a copy of the tree without its
    .git, as on a lent GPU machine), else "unknown"."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("CAMPAIGN_GIT_COMMIT", "unknown")
    return done.stdout.strip()


def provenance(
    *,
    gpu: str,
    gpu_name: str,
    facts: dict[str, Any],
    torch_version: str,
    cuda_version: str | None,
    budget_s: float,
    elapsed_s: float,
    power_source: str,
    argv: Sequence[str],
    meter_update_period_s: float | None = None,
) -> dict[str, Any]:
    """What a committed campaign says about where, when and how it was measured, with the
    meter update period its kernel traces showed [s] (None: none showed one)."""
    return {
        "gpu": gpu,
        "gpu_name": gpu_name,
        **facts,
        "cuda": cuda_version,
        "torch": torch_version,
        "engine": HARNESS_ENGINE,
        "engine_version": torch_version,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m offline.measure.campaign", *argv]),
        "git_commit": git_commit(),
        "budget_s": budget_s,
        "elapsed_s": round(elapsed_s, 1),
        "power_source": power_source,
        "meter_update_period_s": meter_update_period_s,
        "random_weights": True,
    }


def _list_plan(gpu_id: str, budget_s: float, loop_s: float) -> int:
    items = campaign_items(PlanOnly(), gpu_id, "cuda:0", loop_s, MeterPeriod(PLAN_METER_PERIOD_S))
    total = 0.0
    for item in items:
        total += item.planned_s
        fits = "fits" if total <= budget_s else "would be skipped unless earlier items run fast"
        print(f"{item.planned_s:7.1f} s  {total:7.1f} s  {item.id}  ({fits})")
    kernels = sum(i.planned_s for i in items if i.kind != "end_to_end")
    print(
        f"{len(items)} items, {total:.0f} s planned ({kernels:.0f} s kernels), "
        f"budget {budget_s:.0f} s, planned with a meter update period of "
        f"{PLAN_METER_PERIOD_S * 1000:.0f} ms"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m offline.measure.campaign")
    parser.add_argument("--out", type=Path, help="folder to write (data/campaigns/<date>-<gpu>)")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S)
    parser.add_argument(
        "--loop-s", type=float, default=0.8, help="shortest timed loop per kernel [s]"
    )
    parser.add_argument("--plan", metavar="GPU_ID", help="list the items for this GPU and exit")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.plan:
        return _list_plan(args.plan, args.budget_s, args.loop_s)
    if args.out is None:
        parser.error("--out is required")
    try:
        import torch
    except ImportError:
        print(
            "refusing to measure: torch is not installed (pip install '.[measure]')",
            file=sys.stderr,
        )
        return EXIT_NO_GPU
    try:
        if not torch.cuda.is_available():
            raise NoGpu("no NVIDIA GPU/NVML: torch sees no CUDA device")
        meter = open_nvml_meter(torch_devices(1))
        gpu = load_gpu_catalog().get(meter.name)
    except (NoGpu, UnknownGpu) as error:
        print(f"refusing to measure: {error}", file=sys.stderr)
        return EXIT_NO_GPU
    period = MeterPeriod(PLAN_METER_PERIOD_S)
    items = campaign_items(meter, gpu.id, "cuda:0", args.loop_s, period)
    began = time.monotonic()
    run = run_within_budget(items, args.budget_s, progress=not args.no_progress)
    document = provenance(
        gpu=gpu.id,
        gpu_name=meter.name,
        facts=meter.facts(),
        torch_version=str(torch.__version__),
        cuda_version=torch.version.cuda,
        budget_s=args.budget_s,
        elapsed_s=time.monotonic() - began,
        power_source=meter.power_source,
        argv=argv,
        meter_update_period_s=period.detected_s,
    )
    written = write_campaign(args.out, run, document)
    print(
        f"wrote {len(written)} files to {args.out}: {run.count('done')} items done, "
        f"{run.count('skipped')} skipped, {run.count('failed')} failed"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
