"""A campaign's files: one CSV per table, the item log, and the provenance.

    <dir>/provenance.json        format, GPU (catalogue id and NVML name), driver, CUDA, torch,
                                 engine, date, command, git commit, budget, item counts
    <dir>/items.csv              every item: done, skipped (would overrun) or failed, and why
    <dir>/gemm_perf.csv, context_attention_perf.csv, generation_attention_perf.csv, moe_perf.csv
                                 kernels, in aiconfigurator's column layout (latency ms, power W)
    <dir>/end_to_end.csv         random-weight models: energy [J] and time [s] per phase
    <dir>/power_samples.csv      the power trace [W] of every kernel loop

The project commits a campaign under ``data/campaigns/<date>-<gpu>/``; the fit reads every
campaign there (offline.fitting.campaign_rows).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from offline.measure.budget import CampaignRun, Row

CAMPAIGN_FORMAT = "llm-energy-quotes/measurement-campaign/1"
CAMPAIGNS_DIR = Path(__file__).resolve().parents[2] / "data" / "campaigns"
KERNEL_TABLES = (
    "gemm_perf",
    "context_attention_perf",
    "generation_attention_perf",
    "moe_perf",
)
TABLES = (*KERNEL_TABLES, "end_to_end", "power_samples")
PROVENANCE_KEYS = frozenset(
    {"format", "gpu", "gpu_name", "driver", "cuda", "torch", "engine", "engine_version"}
    | {"date", "command", "git_commit", "budget_s", "elapsed_s", "power_source", "items"}
)
"""What provenance.json must hold (read_campaign refuses a campaign without any of them)."""


class InvalidCampaign(ValueError):
    """A folder that is not a campaign this project reads."""


def _columns(rows: Iterable[Row]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def write_table(path: Path, rows: list[Row]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=_columns(rows))
        writer.writeheader()
        writer.writerows(rows)


def write_campaign(out: Path, run: CampaignRun, provenance: dict[str, Any]) -> list[Path]:
    """Write `run` and `provenance` (plus the item counts) under `out`; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    counts = {s: run.count(s) for s in ("done", "skipped", "failed")}
    document = {"format": CAMPAIGN_FORMAT, **provenance, "items": counts}
    missing = PROVENANCE_KEYS - set(document)
    if missing:
        raise InvalidCampaign(f"provenance lacks {sorted(missing)}")
    written = [out / "provenance.json"]
    written[0].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    write_table(out / "items.csv", [asdict(entry) for entry in run.log])
    written.append(out / "items.csv")
    for table in TABLES:
        if run.rows.get(table):
            write_table(out / f"{table}.csv", run.rows[table])
            written.append(out / f"{table}.csv")
    return written


def _number(text: str) -> Any:
    """A CSV cell as int, float or bool where it is one, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


@dataclass(frozen=True, slots=True)
class Campaign:
    """A campaign read back: its folder, provenance and tables as columns."""

    path: Path
    provenance: dict[str, Any]
    tables: dict[str, dict[str, list[Any]]]


def read_table(path: Path) -> dict[str, list[Any]]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    names = list(rows[0]) if rows else []
    return {name: [_number(row[name]) for row in rows] for name in names}


def read_campaign(path: Path) -> Campaign:
    """The campaign in `path`; InvalidCampaign when its provenance is missing or incomplete."""
    try:
        provenance = json.loads((path / "provenance.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise InvalidCampaign(f"{path}: {error}") from None
    if provenance.get("format") != CAMPAIGN_FORMAT:
        raise InvalidCampaign(f"{path}: not a campaign (format {CAMPAIGN_FORMAT!r} expected)")
    missing = PROVENANCE_KEYS - set(provenance)
    if missing:
        raise InvalidCampaign(f"{path}: provenance lacks {sorted(missing)}")
    tables = {t: read_table(path / f"{t}.csv") for t in TABLES if (path / f"{t}.csv").is_file()}
    return Campaign(path, provenance, tables)


def committed_campaigns(root: Path = CAMPAIGNS_DIR) -> list[Campaign]:
    """Every campaign committed under `root` (none: an empty list), in folder order."""
    if not root.is_dir():
        return []
    return [read_campaign(p) for p in sorted(root.iterdir()) if (p / "provenance.json").is_file()]
