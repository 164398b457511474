"""Shared helpers for the measured-data loaders: locating the data, reading CSV rows, GPU ids.

The measured data lives beside the repository (``../shared/data``), never inside it; every loader
takes ``data_dir`` so a command line can point elsewhere.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

# offline/fitting/<this file> -> parents[2] is the repository root; the data sits beside it.
DEFAULT_DATA_DIR: Path = Path(__file__).resolve().parents[2].parent / "shared" / "data"

# The project's catalogue ids for the GPUs that appear in these data sets.
A100_40GB = "A100-SXM4-40GB"
A100_80GB = "A100-SXM4-80GB"
H100_80GB = "H100-SXM5-80GB"
KNOWN_GPU_IDS: frozenset[str] = frozenset({A100_40GB, A100_80GB, H100_80GB})

MS_PER_S = 1000.0


@dataclass(frozen=True, slots=True)
class CsvRow:
    """One data row of a CSV file with its provenance reference ``<relative path>:<line>``."""

    ref: str
    values: dict[str, str]

    def text(self, column: str) -> str:
        """The raw cell; a missing column is a data error, so name file, line and column."""
        try:
            return self.values[column]
        except KeyError:
            raise KeyError(f"{self.ref}: no column {column!r}") from None

    def integer(self, column: str) -> int:
        """The cell as an int (accepts "4" and "4.0", rejects "4.5")."""
        value = float(self.text(column))
        if not value.is_integer():
            raise ValueError(f"{self.ref}: column {column!r} is not an integer: {value}")
        return int(value)

    def number(self, column: str) -> float:
        """The cell as a float, in whatever unit the file uses (callers convert)."""
        try:
            return float(self.text(column))
        except ValueError:
            raise ValueError(f"{self.ref}: column {column!r} is not a number") from None

    def flag(self, column: str) -> bool:
        """The cell as a bool; the files write Python-style ``True``/``False``."""
        raw = self.text(column).strip().lower()
        if raw not in ("true", "false"):
            raise ValueError(f"{self.ref}: column {column!r} is not a bool: {raw!r}")
        return raw == "true"


def resolve_data_dir(data_dir: Path) -> Path:
    """``data_dir`` as a Path, failing loudly if it is not a directory."""
    resolved = Path(data_dir)
    if not resolved.is_dir():
        raise FileNotFoundError(
            f"measured-data directory not found: {resolved} (expected ../shared/data beside the "
            "repository, or pass data_dir)"
        )
    return resolved


def require_file(data_dir: Path, relative: str) -> Path:
    """``data_dir / relative``, raising FileNotFoundError naming the expected path."""
    path = resolve_data_dir(data_dir) / relative
    if not path.is_file():
        raise FileNotFoundError(f"expected data file not found: {path}")
    return path


def read_rows(data_dir: Path, relative: str) -> list[CsvRow]:
    """All data rows of ``data_dir / relative``; refs use the file's line numbers (header = 1)."""
    path = require_file(data_dir, relative)
    rows: list[CsvRow] = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        for values in reader:
            rows.append(CsvRow(ref=f"{relative}:{reader.line_num}", values=values))
    return rows


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks so large traces do not sit in memory twice."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
