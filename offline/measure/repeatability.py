"""How far a reading moves between two campaigns of the same GPU.

``python -m offline.measure.repeatability DIR_A DIR_B`` prints, for every kernel loop both
campaigns measured, the log ratio B/A of

- latency (``latency`` of the kernel tables),
- mean power from the energy counter (``power``),
- the time-weighted mean of the sampled power trace (offline.measure.power_trace),

and of every end-to-end phase time both measured; each as the standard deviation (ddof 1) and
the largest absolute value of the log ratios, with how many pairs back them. It also prints
each campaign's meter update period, detected from its traces (power_trace). A log ratio of
0.064 is a 6.4 % move. The two folders must be campaigns of the same GPU.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import stdev

from offline.measure.campaign_output import KERNEL_TABLES, Campaign, read_campaign
from offline.measure.power_trace import (
    campaign_update_period_s,
    time_weighted_mean_w,
    traces_by_item,
)


class DifferentGpus(ValueError):
    """The two campaigns ran on different GPU types: their readings are not repeats."""


@dataclass(frozen=True, slots=True)
class Spread:
    """Log ratios B/A of one reading over the pairs both campaigns measured."""

    reading: str
    pairs: int
    sd_log: float  # nan with fewer than two pairs
    max_abs_log: float  # nan without a pair


@dataclass(frozen=True, slots=True)
class Repeatability:
    gpu: str
    spreads: tuple[Spread, ...]
    update_period_s: tuple[float | None, float | None]  # of campaign A, of campaign B


def spread(reading: str, a: dict[str, float], b: dict[str, float]) -> Spread:
    """The log ratios b/a of the keys both hold with positive values."""
    logs = [math.log(b[k] / a[k]) for k in sorted(a.keys() & b.keys()) if a[k] > 0 and b[k] > 0]
    return Spread(
        reading,
        len(logs),
        stdev(logs) if len(logs) >= 2 else math.nan,
        max(abs(x) for x in logs) if logs else math.nan,
    )


def kernel_readings(campaign: Campaign) -> dict[str, dict[str, float]]:
    """Latency [ms], counter power [W] and trace mean power [W] of each kernel loop."""
    out: dict[str, dict[str, float]] = {"latency": {}, "counter power": {}, "trace power": {}}
    for name in KERNEL_TABLES:
        table = campaign.tables.get(name)
        if not table:
            continue
        for item, latency, power in zip(
            table["item"], table["latency"], table["power"], strict=True
        ):
            out["latency"][str(item)] = float(latency)
            out["counter power"][str(item)] = float(power)
    samples = campaign.tables.get("power_samples")
    for item, (t_s, power_w) in (traces_by_item(samples) if samples else {}).items():
        mean = time_weighted_mean_w(t_s, power_w)
        if mean is not None:
            out["trace power"][item] = mean
    return out


def phase_times(campaign: Campaign) -> dict[str, float]:
    """Time [s] of each end-to-end (item, phase)."""
    table = campaign.tables.get("end_to_end")
    if not table:
        return {}
    return {
        f"{item} {phase}": float(time_s)
        for item, phase, time_s in zip(table["item"], table["phase"], table["time_s"], strict=True)
    }


def repeatability(a: Campaign, b: Campaign) -> Repeatability:
    """The run-to-run figures of two campaigns of one GPU; DifferentGpus otherwise."""
    if a.provenance["gpu"] != b.provenance["gpu"]:
        raise DifferentGpus(f"{a.provenance['gpu']} and {b.provenance['gpu']} are not one GPU")
    ka, kb = kernel_readings(a), kernel_readings(b)
    spreads = [spread(name, ka[name], kb[name]) for name in ka]
    spreads.append(spread("end-to-end phase time", phase_times(a), phase_times(b)))
    periods = tuple(
        campaign_update_period_s(traces_by_item(c.tables["power_samples"]))
        if "power_samples" in c.tables
        else None
        for c in (a, b)
    )
    return Repeatability(str(a.provenance["gpu"]), tuple(spreads), (periods[0], periods[1]))


def _period(value: float | None) -> str:
    return "none detected" if value is None else f"{value * 1000:.1f} ms"


def report(result: Repeatability, names: tuple[str, str]) -> str:
    """A Markdown table of `result` (percentages: 100 x the log ratio)."""
    lines = [
        f"{names[1]} against {names[0]} ({result.gpu}):",
        "",
        "| reading | pairs | sd of log ratio | largest |log ratio| |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {s.reading} | {s.pairs} | {100 * s.sd_log:.1f} % | {100 * s.max_abs_log:.1f} % |"
        for s in result.spreads
    ]
    lines.append("")
    lines += [
        f"meter update period of {name}: {_period(p)} (median interval between changes of "
        "the sampled power)"
        for name, p in zip(names, result.update_period_s, strict=True)
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offline.measure.repeatability")
    parser.add_argument("first", type=Path, help="a campaign folder")
    parser.add_argument("repeat", type=Path, help="a campaign folder of the same GPU")
    args = parser.parse_args(argv)
    try:
        result = repeatability(read_campaign(args.first), read_campaign(args.repeat))
    except DifferentGpus as error:
        print(f"not repeats: {error}", file=sys.stderr)
        return 2
    print(report(result, (args.first.name, args.repeat.name)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
