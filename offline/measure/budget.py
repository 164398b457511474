"""Running a campaign's items inside a fixed time budget.

Each item carries a planned time [s]. Before an item starts, its planned time is scaled by how
far the items so far overran their plans (actual / planned, never below 1), and the item is
skipped, with the reason recorded, when that would take the campaign past its budget; later,
shorter items may still fit. An item that raises is recorded as failed and the campaign goes
on. An interrupt (Ctrl-C, or `timeout -s INT`) stops it: the item it stopped is recorded as
failed, the rest as skipped, and what was measured before is returned to be written. A
progress bar (tqdm) counts planned seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]
Tables = dict[str, list[Row]]
"""Rows by the output table they go to."""


@dataclass(frozen=True, slots=True)
class Item:
    """One measurement of some `kind` (a kernel table or "end_to_end"): `run` measures and
    returns its rows by table."""

    id: str
    kind: str
    planned_s: float
    run: Callable[[], Tables]


@dataclass(frozen=True, slots=True)
class ItemLog:
    """What became of one item: done, skipped (would overrun) or failed, and its times [s]."""

    id: str
    kind: str
    status: str
    planned_s: float
    actual_s: float
    reason: str = ""


@dataclass
class CampaignRun:
    """The rows of every table, and the log of every item in order."""

    rows: Tables = field(default_factory=dict)
    log: list[ItemLog] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for entry in self.log if entry.status == status)


def overrun_factor(planned_s: float, actual_s: float) -> float:
    """How much slower than planned the items so far ran (1 before any ran, never below 1)."""
    return max(1.0, actual_s / planned_s) if planned_s > 0 else 1.0


def run_within_budget(
    items: Sequence[Item],
    budget_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    progress: bool = True,
    failures: tuple[type[BaseException], ...] = (RuntimeError, ValueError, MemoryError),
) -> CampaignRun:
    """Run `items` in order, each only when its scaled planned time still fits in what is
    left of `budget_s` (see the module doc)."""
    from tqdm import tqdm

    run = CampaignRun()
    start = clock()
    planned_done = actual_done = 0.0
    bar = tqdm(
        total=round(sum(i.planned_s for i in items)),
        unit="s",
        desc="campaign (planned s)",
        disable=not progress,
    )
    for index, item in enumerate(items):
        left_s = budget_s - (clock() - start)
        expected_s = item.planned_s * overrun_factor(planned_done, actual_done)
        if expected_s > left_s:
            reason = f"would overrun: {expected_s:.1f} s expected, {left_s:.1f} s left"
            run.log.append(ItemLog(item.id, item.kind, "skipped", item.planned_s, 0.0, reason))
            bar.update(round(item.planned_s))
            continue
        began = clock()
        try:
            tables = item.run()
        except failures as error:  # one kernel or model that cannot run must not end it
            taken = clock() - began
            reason = f"{type(error).__name__}: {error}"[:300]
            run.log.append(ItemLog(item.id, item.kind, "failed", item.planned_s, taken, reason))
        except KeyboardInterrupt:  # keep what was measured; the caller writes it
            taken = clock() - began
            run.log.append(
                ItemLog(item.id, item.kind, "failed", item.planned_s, taken, "interrupted")
            )
            run.log.extend(
                ItemLog(rest.id, rest.kind, "skipped", rest.planned_s, 0.0, "interrupted")
                for rest in items[index + 1 :]
            )
            break
        else:
            taken = clock() - began
            for table, rows in tables.items():
                run.rows.setdefault(table, []).extend(rows)
            run.log.append(ItemLog(item.id, item.kind, "done", item.planned_s, taken))
        planned_done += item.planned_s
        actual_done += taken
        bar.update(round(item.planned_s))
        bar.set_postfix_str(f"{clock() - start:.0f}/{budget_s:.0f} s")
    bar.close()
    return run
