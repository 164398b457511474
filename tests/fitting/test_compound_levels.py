"""Quotes at two evidence levels at once: which held-out rows are, and how the rule that
compounds the two levels' intervals is chosen (offline/fitting/compound_levels.py)."""

from __future__ import annotations

import csv
from pathlib import Path

from offline.fitting.compound_levels import (
    Compounded,
    choose_compound,
    compound_rows,
    nested_choice,
    twice_rows,
)
from offline.fitting.held_out_rows import HeldOutRow
from offline.fitting.silicon_levels import SOURCE
from offline.fitting.silicon_rows import SILICON_CSV


def _row(level: str, line: int, gpu: str, engine: str, quantity: str = "total") -> HeldOutRow:
    ref = f"{SILICON_CSV}:{line}"
    return HeldOutRow(level, gpu, quantity, SOURCE, ref, 2.0, 1.0, gpu, engine, "bf16", "llama")


def test_a_gpu_held_out_run_of_a_version_only_its_gpu_ran_is_two_levels(tmp_path: Path) -> None:
    # CSV lines 2..6: H100 vllm 0.12.0, H200 vllm 0.12.0 (both GPUs ran it: one level),
    # H200 vllm 0.16.0 (only H200: two), H100 vllm without a version (unknown: left out),
    # H200 sglang 0.12.0 (sglang's 0.12.0 ran on H200 only: two).
    versions = [("H100", "vllm", "0.12.0"), ("H200", "vllm", "0.12.0"), ("H200", "vllm", "0.16.0")]
    versions += [("H100", "vllm", ""), ("H200", "sglang", "0.12.0")]
    path = tmp_path / SILICON_CSV
    path.parent.mkdir(parents=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["backend_version"])
        writer.writerows([v] for _, _, v in versions)
    rows = [_row("gpu", i, g, e) for i, (g, e, _) in enumerate(versions, start=2)]
    rows.append(_row("family", 4, "H200", "vllm"))  # not a GPU-held-out row
    twice = compound_rows(rows, tmp_path)
    assert [(r.group, r.row_ref) for r in twice] == [
        ("H200 vllm 0.16.0", f"{SILICON_CSV}:4"),
        ("H200 sglang 0.12.0", f"{SILICON_CSV}:6"),
    ]
    assert all(r.level == "gpu" and r.measured == 2.0 for r in twice)


def _flags(inside: dict[str, int], n: int = 10) -> list[Compounded]:
    row = _row("gpu", 2, "H200", "vllm")
    return [
        (row, {h: i < k for h, k in inside.items()}, dict.fromkeys(inside, 1.0)) for i in range(n)
    ]


def test_the_compound_rule_is_the_one_closest_to_nominal_and_nested_leaves_the_group_out() -> None:
    # g1 inside 5 / 8 / 9 / 10 of 10 rows under alone / widest / rss / sum, g2 3 / 4 / 8 / 10.
    # Pooled: 0.4, 0.6, 0.85, 1.0: rss is closest to 0.8. Without g1 (g2 alone) rss (0.8) is
    # chosen: g1's rows 9 of 10 inside; without g2 (g1 alone) widest (0.8): g2's rows 4 of
    # 10; nested 13 of 20.
    inside = {
        "g1": _flags({"alone": 5, "widest": 8, "rss": 9, "sum": 10}),
        "g2": _flags({"alone": 3, "widest": 4, "rss": 8, "sum": 10}),
    }
    assert choose_compound(inside, 0.8) == "rss"
    assert choose_compound(inside, 0.8, without="g1") == "rss"
    assert choose_compound(inside, 0.8, without="g2") == "widest"
    nested = nested_choice(inside, 0.8)
    assert sum(ok for _, ok, _ in nested) == 13 and len(nested) == 20


def test_alike_shares_take_the_narrower_rule() -> None:
    # every compounding rule holds 8 of 10: the envelope (narrowest) is kept; the level alone
    # too, and narrower still
    alike = {"alone": 6, "widest": 8, "rss": 8, "sum": 8}
    assert choose_compound({"g": _flags(alike)}, 0.8) == "widest"
    assert choose_compound({"g": _flags({**alike, "alone": 8})}, 0.8) == "alone"


def test_only_gpu_and_vendor_rows_of_a_version_never_measured_are_compounded() -> None:
    rows = [
        _row("vendor", 2, "MI250", "vllm==0.6.1"),
        _row("vendor", 3, "MI250", "vllm-v0"),
        _row("engine", 4, "H100", "vllm==0.6.1"),
    ]
    assert [r.row_ref for r in twice_rows(rows, "vendor", "total")] == [f"{SILICON_CSV}:2"]
    assert twice_rows(rows, "engine", "total") == []
