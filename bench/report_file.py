"""The opening lines of a benchmark report (what ran, when, where) and writing it out."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from pathlib import Path


def opening(title: str, machine_note: str = "") -> str:
    """`# title`, then the date, the machine (`machine_note` appended) and the command line."""
    command = shlex.join(["python", *sys.argv])
    return (
        f"# {title}\n\n"
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}\n"
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}{machine_note}\n"
        f"- command: `{command}`\n"
    )


def write_report(path: Path, report: str) -> None:
    """Write `report` to `path` (creating its folder) and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report, encoding="utf-8")
    print(f"wrote {path}")
