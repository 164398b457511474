"""The load report: a Markdown table per database and a plot of latency percentiles."""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path

from load.open_loop import StepResult, percentile

P99_GOAL_S = 0.010
SUSTAINED_FRACTION = 0.99  # of the scheduled requests answered 200, none shed


def machine_line() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    system = f"Linux {platform.release()}, Python {platform.python_version()}"
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    # Read when the report is written, i.e. just after the servers under test stopped.
    when = "load average when this report was written"
    return f"{model}, {os.cpu_count()} logical CPUs, {system}; {when} {load}"


def sustained(step: StepResult) -> bool:
    """Every due request answered 200 at (almost) the offered rate: nothing shed or failed."""
    return (
        step.shed == 0
        and step.errors == 0
        and step.unsent == 0
        and step.ok >= SUSTAINED_FRACTION * step.scheduled
    )


def ceiling_per_s(steps: Sequence[StepResult]) -> float:
    """The highest offered rate sustained (see `sustained`), 0 if none was."""
    return max((step.offered_per_s for step in steps if sustained(step)), default=0.0)


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f}"


def _errors(step: StepResult) -> str:
    kinds = ", ".join(f"{count}x {kind}" for kind, count in sorted(step.error_kinds.items()))
    return f"{step.errors} ({kinds})" if kinds else str(step.errors)


def _percent(share: float) -> str:
    return "-" if math.isnan(share) else f"{100 * share:.0f}"


def step_table(steps: Sequence[StepResult]) -> list[str]:
    lines = [
        "| offered /s | achieved 200/s | p50 ms | p99 ms | p99.9 ms | max ms | 200 | stored "
        "| shed 503 | errors | unsent | server CPU µs/req | database CPU µs/req "
        "| generator CPU % | rest of machine CPU % | busiest worker % |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for step in steps:
        answered = len(step.latencies_all_s)
        lat = step.latencies_ok_s
        server_us = step.server_cpu_s / answered * 1e6 if answered else float("nan")
        database_us = step.database_cpu_s / answered * 1e6 if answered else float("nan")
        lines.append(
            f"| {step.offered_per_s:g} | {step.achieved_per_s:.0f} | {_ms(percentile(lat, 0.5))} "
            f"| {_ms(percentile(lat, 0.99))} | {_ms(percentile(lat, 0.999))} "
            f"| {_ms(max(lat, default=math.nan))} | {step.ok} | {step.stored} | {step.shed} "
            f"| {_errors(step)} | {step.unsent} | {server_us:.0f} | {database_us:.0f} "
            f"| {100 * step.generator_cpu_s / step.wall_s:.0f} "
            f"| {100 * step.other_cpu_s / step.wall_s:.0f} "
            f"| {_percent(step.busiest_worker_share)} |"
        )
    return lines


def plot(results: Mapping[str, Sequence[StepResult]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (axis, rates_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = {"p50": ":", "p99": "-", "p99.9": "--"}
    for (database, steps), color in zip(results.items(), ("tab:blue", "tab:orange"), strict=False):
        rates = [step.offered_per_s for step in steps]
        for name, fraction in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)):
            values = [percentile(step.latencies_ok_s, fraction) * 1000 for step in steps]
            axis.plot(rates, values, styles[name], marker="o", color=color,
                      label=f"{database} {name}")  # fmt: skip
        rates_axis.plot(rates, [step.achieved_per_s for step in steps], "-", marker="o",
                        color=color, label=f"{database} answered 200/s")  # fmt: skip
        rates_axis.plot(rates, [step.shed / step.wall_s for step in steps], "--", marker="x",
                        color=color, label=f"{database} shed 503/s")  # fmt: skip
    axis.axhline(P99_GOAL_S * 1000, color="grey", linewidth=0.8)
    axis.set_yscale("log")
    axis.set_xlabel("offered rate [estimates/s]")
    axis.set_ylabel("latency of 200 answers, from due time [ms]")
    axis.set_title("Latency percentiles (grey: 10 ms p99 goal)")
    axis.legend(fontsize=8)
    axis.grid(True, which="both", alpha=0.3)
    rates_axis.set_xlabel("offered rate [estimates/s]")
    rates_axis.set_ylabel("answers per second")
    rates_axis.set_title("Answered and shed")
    rates_axis.legend(fontsize=8)
    rates_axis.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
