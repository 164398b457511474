"""``python -m offline.measure run PLAN [--out measurements.jsonl] [--post URL --key KEY]``.

A configuration of N GPUs runs on torch's ``cuda:0`` .. ``cuda:N-1`` (restrict or reorder
them with CUDA_VISIBLE_DEVICES), metered on the same N GPUs; wider ones are skipped.
Exit codes: 0 done, 1 the plan cannot be read, 2 no NVIDIA GPU/NVML (or no CUDA torch) here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from offline.measure.meter import EnergyMeter, NoGpu, open_nvml_meter, torch_devices
from offline.measure.plan import InvalidPlan, PlannedConfiguration, read_plan
from offline.measure.run import ServicePoster, run_plan
from offline.measure.stability import StabilityRule
from offline.measure.workload import PhaseRunners, build_runners
from service.catalog.models import load_model_catalog

EXIT_BAD_PLAN = 1
EXIT_NO_GPU = 2


def cuda_device_count() -> int:
    """CUDA devices torch sees; NoGpu when torch is missing or sees none."""
    try:
        import torch
    except ImportError:
        raise NoGpu(
            "no NVIDIA GPU/NVML: torch is not installed (pip install '.[measure]')"
        ) from None
    if not torch.cuda.is_available():
        raise NoGpu("no NVIDIA GPU/NVML: torch sees no CUDA device")
    return int(torch.cuda.device_count())


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def meters_on_torch_devices() -> Callable[[int], EnergyMeter]:
    """`meters(n)`: a meter on the GPUs of torch's cuda:0 .. cuda:n-1 (opened once per n)."""
    opened: dict[int, EnergyMeter] = {}

    def meters(count: int) -> EnergyMeter:
        if count not in opened:
            opened[count] = open_nvml_meter(torch_devices(count))
        return opened[count]

    return meters


def builder(dtype_name: str) -> Callable[[PlannedConfiguration, list[str]], PhaseRunners]:
    """Builds a configuration's runners from the catalogue's shapes, layers moved."""
    models = load_model_catalog()

    def build(config: PlannedConfiguration, devices: list[str]) -> PhaseRunners:
        arch = models.get(config.model).require_architecture()
        if config.layers_delta:
            arch = replace(arch, num_layers=arch.num_layers + config.layers_delta)
        return build_runners(
            arch,
            config.batch_size,
            config.prompt_tokens,
            config.output_tokens,
            devices=devices,
            dtype_name=dtype_name,
        )

    return build


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offline.measure")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="measure every configuration of a plan")
    run.add_argument("plan", type=Path)
    run.add_argument("--out", type=Path, default=Path("measurements.jsonl"))
    run.add_argument("--post", metavar="URL", help="quote and post observations to this service")
    run.add_argument("--key", help="API key for --post (scopes estimate, observe)")
    run.add_argument("--dtype", default="bfloat16")
    run.add_argument("--min-repeats", type=int, default=3)
    run.add_argument("--max-repeats", type=int, default=10)
    run.add_argument("--tolerance", type=float, default=0.05, help="relative spread, stable")
    run.add_argument(
        "--min-span-s",
        type=float,
        default=1.0,
        help="shortest metered reading [s]: runs back to back until it lasts this (the "
        "energy counter updates only every meter period; 10 periods or more)",
    )
    run.add_argument("--limit", type=int, help="measure only the first N configurations")
    args = parser.parse_args(argv)
    try:
        configs = read_plan(args.plan)
    except InvalidPlan as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_PLAN
    try:
        gpus = cuda_device_count()
        meters = meters_on_torch_devices()
        meters(1)  # refuse here, before any output, when cuda:0 cannot be metered
    except NoGpu as error:
        print(f"refusing to measure: {error}", file=sys.stderr)
        return EXIT_NO_GPU
    rule = StabilityRule(
        args.min_repeats, args.max_repeats, args.tolerance, min_span_s=args.min_span_s
    )
    poster = ServicePoster(args.post, args.key) if args.post else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        measured, skipped = run_plan(
            configs[: args.limit],
            meters,
            builder(args.dtype),
            out,
            rule=rule,
            devices_available=gpus,
            engine_version=torch_version(),
            poster=poster,
        )
    print(f"wrote {args.out}: {measured} measured, {skipped} skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
