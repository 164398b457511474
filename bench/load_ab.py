"""Interleaved A/B rounds of the open-loop load test: one setting's values, one after the other,
round after round, merged into one report.

    python bench/load_ab.py --setting QUOTES_POSTGRES_COMMIT_IN_LOOP --values false,true \\
        [--labels "writer thread,from the loop"] [--rounds 3] [--output bench/results/X.md] \\
        -- --postgres-url URL --skip-sqlite --rates 1000,1500,2000 --step-s 15

This VM's run-to-run spread (bench/results/postgres_in_loop.md: p99 at 1,000/s from 53 to
106 ms with the same code, minutes apart) is larger than most effects worth measuring, so a
setting is judged by rounds that alternate its values, not by two runs an hour apart.
Everything after `--` goes to bench/load_test.py unchanged; each run's own report and JSON
stay beside the output (`<output stem>_runs/`). `rest of machine CPU %` tells the rounds a
neighbour disturbed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from report_file import command_line, write_report

ROOT = Path(__file__).resolve().parents[1]
LOAD_TEST = ROOT / "bench" / "load_test.py"
COLUMNS = (
    "| setting, round | database | offered /s | achieved 200/s | p50 ms | p99 ms | p99.9 ms "
    "| 200 | shed 503 | errors | server CPU µs/req | database CPU µs/req "
    "| rest of machine CPU % |"
)


def run_once(setting: str, value: str, load_args: list[str], output: Path) -> dict[str, list]:
    """One load test with `setting=value` in the server's environment; its JSON figures."""
    environment = {**os.environ, setting: value}
    command = [sys.executable, str(LOAD_TEST), *load_args, "--output", str(output)]
    subprocess.run(command, env=environment, check=True)
    figures: dict[str, list] = json.loads(output.with_suffix(".json").read_text())
    return figures


def table_row(label: str, database: str, step: dict[str, float]) -> str:
    answered = step["answered"] or float("nan")
    return (
        f"| {label} | {database} | {step['offered_per_s']:g} | {step['achieved_per_s']:.0f} "
        f"| {step['p50_s'] * 1e3:.1f} | {step['p99_s'] * 1e3:.1f} | {step['p999_s'] * 1e3:.1f} "
        f"| {step['ok']} | {step['shed']} | {step['errors']} "
        f"| {step['server_cpu_s'] / answered * 1e6:.0f} "
        f"| {step.get('database_cpu_s', 0.0) / answered * 1e6:.0f} "
        f"| {100 * step['other_cpu_s'] / step['wall_s']:.0f} |"
    )


def main() -> None:
    arguments = sys.argv[1:]
    load_args = arguments[arguments.index("--") + 1 :] if "--" in arguments else []
    own = arguments[: arguments.index("--")] if "--" in arguments else arguments
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", required=True, help="environment variable, e.g. QUOTES_X")
    parser.add_argument("--values", required=True, help="its values, CSV, in round order")
    parser.add_argument("--labels", help="a label per value, CSV (default: the values)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(own)
    values = args.values.split(",")
    labels = args.labels.split(",") if args.labels else values
    if len(labels) != len(values):
        parser.error("--labels needs one label per value")
    runs = args.output.parent / f"{args.output.stem}_runs"
    runs.mkdir(parents=True, exist_ok=True)
    rows = []
    for round_number in range(1, args.rounds + 1):
        for value, label in zip(values, labels, strict=True):
            print(f"--- round {round_number}: {args.setting}={value}", flush=True)
            figures = run_once(args.setting, value, load_args, runs / f"{value}_r{round_number}.md")
            for database, steps in figures.items():
                rows += [table_row(f"{label} r{round_number}", database, s) for s in steps]
    hidden = {}
    if "--postgres-url" in load_args:
        hidden["$POSTGRES_URL"] = load_args[load_args.index("--postgres-url") + 1]
    report = [
        f"# Interleaved A/B: {args.setting} = {', '.join(values)}",
        "",
        f"Command: `{command_line(hidden)}`",
        "",
        f"{args.rounds} rounds; in each, bench/load_test.py ran once per value, in the order "
        "given. Columns as in bench/results/load.md; each run's own report is in "
        f"`{runs.name}/`.",
        "",
        COLUMNS,
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        *rows,
        "",
    ]
    write_report(args.output, "\n".join(report))


if __name__ == "__main__":
    main()
