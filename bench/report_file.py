"""The opening lines of a benchmark report (what ran, when, where) and writing it out."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path


def command_line(hidden: Mapping[str, str | None] | None = None) -> str:
    """`python` and this process's arguments, shell-quoted; every `hidden` value found in an
    argument (a database URL with its password) is written as its key (`$DATABASE_URL`)."""
    secrets = {name: value for name, value in (hidden or {}).items() if value}
    words = []
    for word in ["python", *sys.argv]:
        masked = word
        for name, value in secrets.items():
            masked = masked.replace(value, name)
        words.append(masked if masked != word else shlex.quote(word))
    return " ".join(words)


def opening(
    title: str, machine_note: str = "", hidden: Mapping[str, str | None] | None = None
) -> str:
    """`# title`, then the date, the machine (`machine_note` appended) and the command line
    (`hidden` as in `command_line`)."""
    command = command_line(hidden)
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
