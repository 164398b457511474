"""Experiment (issue 4, not shipped): how the ML.ENERGY v2 rows' batch and time enter the cost
model's fit. Writes nothing; prints held-out (leave-one-family-out) energy accuracy of the cost
model alone. Results and reasoning: bench/results/v2_steady_state_time.md.

    python bench/v2_steady_state_time.py --data ../shared/data                  # all variants
    python bench/v2_steady_state_time.py --data ../shared/data --variant total  # one
    python bench/v2_steady_state_time.py --data ../shared/data --little         # the ratios

Variants of the v2 mapping (v3 rows never change):

- ``base``: the data README's mapping, as roofline 2026.11.6 was fitted: batch = round(Avg BS),
  vLLM 0.5.4's host overheads fitted to each row's `Avg TPOT`.
- ``lead``: batch = round(Token tput x Avg TPOT) (Little's law with `Avg TPOT` as the step
  time), time still `Avg TPOT`. Feeds each row's measured throughput into its input.
- ``tpot_ss``: batch = round(Avg BS), the model's decode step fitted to Avg BS / Token tput
  (the steady state's time per token, its prefill iterations included).
- ``total``: batch = round(Avg BS), the static batch's whole predicted time (prefill and every
  decode step) fitted to batch x output tokens / Token tput; the row's throughput is a training
  label only, never an input.

``--duty`` adds bench/host_power_duty_cycle.py's duty-cycle power to whichever variant runs.
Each fold refits every coefficient without the held-out family (`fit_without`), exactly as the
shipped validation; the patches live in this process only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import offline.fitting.cross_validation as cross_validation
import offline.fitting.end_to_end as end_to_end
from offline.fitting.datasets import DEFAULT_DATA_DIR, EnergyMeasurement
from offline.fitting.datasets_common import read_rows
from offline.fitting.end_to_end import (
    EndToEndRow,
    Overheads,
    predicted_per_sequence_j,
    predicted_prefill_s,
    predicted_tpot_s,
)
from offline.fitting.energy_leaderboard import MLENERGY_V2_CSV
from offline.fitting.family_folds import FoldData, fit_without

FAMILIES = ("gemma", "gpt-oss", "llama", "mistral", "phi", "qwen", "starcoder")
VARIANTS = ("base", "lead", "tpot_ss", "total")
FloatArray = npt.NDArray[np.float64]

# measured energy per request (unique per v2 row) -> the steady state's whole static-batch time
TOTAL_BY_ENERGY: dict[float, float] = {}


def throughputs(data_dir: Path) -> dict[str, float]:
    """v2 `Token tput (tok/s)` by row reference."""
    return {r.ref: r.number("Token tput (tok/s)") for r in read_rows(data_dir, MLENERGY_V2_CSV)}


def mapped(m: EnergyMeasurement, variant: str, tput: dict[str, float]) -> EnergyMeasurement:
    """Row `m` under `variant` (v3 rows unchanged)."""
    if m.source != "mlenergy-v2" or variant in ("base", "total"):
        return m
    t = tput[m.row_ref]
    if variant == "lead":
        return replace(m, batch_size=max(1, round(t * m.time_per_output_token_s)))
    if variant == "tpot_ss":
        return replace(m, time_per_output_token_s=m.batch_size / t)
    raise ValueError(variant)


def predicted_total_s(rows: list[EndToEndRow], overheads: Overheads) -> FloatArray:
    """The static batch's whole time: prefill plus every decode step [s]."""
    steps = np.array([r.decode_steps for r in rows], dtype=np.float64)
    return predicted_prefill_s(rows, overheads) + steps * predicted_tpot_s(rows, overheads)


def _total_of(r: EndToEndRow) -> float | None:
    if r.source != "mlenergy-v2" or r.measured_per_sequence_j is None:
        return None
    return TOTAL_BY_ENERGY.get(r.measured_per_sequence_j)


def fit_overheads_total(
    rows: list[EndToEndRow], prefill_overhead_s: float | None = None, *, per_worker: bool = True
) -> Overheads:
    """`end_to_end.fit_overheads` with v2 rows scored on their whole time instead of TPOT."""
    timed = [r for r in rows if r.measured_prefill_s is not None]
    whole = [r for r in rows if _total_of(r) is not None]
    stepped = [r for r in rows if _total_of(r) is None]
    tpot = np.array([r.measured_tpot_s for r in stepped])
    total = np.array([_total_of(r) for r in whole], dtype=np.float64)
    prefill = np.array([r.measured_prefill_s or 0.0 for r in timed])
    fixed = prefill_overhead_s if not timed else None

    def residuals(overheads: Overheads) -> FloatArray:
        return np.concatenate(
            [
                np.log(predicted_tpot_s(stepped, overheads) / tpot),
                np.log(predicted_total_s(whole, overheads) / total),
                np.log(predicted_prefill_s(timed, overheads) / prefill),
            ]
        )

    # Start, bounds and scales exactly as end_to_end.fit_overheads: the same solver.
    return end_to_end.fit_overheads_to(residuals, fixed, per_worker=per_worker)


def _line(name: str, ratio: FloatArray) -> str:
    error = np.abs(ratio - 1.0)
    within = [100.0 * float(np.mean(error < t)) for t in (0.05, 0.1, 0.3)]
    return (
        f"{name:>9}: {len(ratio):3d} rows, MAPE {100 * error.mean():5.1f} %, within 5/10/30 % "
        f"{within[0]:3.0f}/{within[1]:3.0f}/{within[2]:3.0f}, median {np.median(ratio):.3f}"
    )


def run(
    base: FoldData,
    variant: str,
    tput: dict[str, float],
    families: tuple[str, ...] = FAMILIES,
    rows: bool = False,
) -> None:
    data = replace(base, energy=[mapped(m, variant, tput) for m in base.energy])
    original = vars(cross_validation)["fit_overheads"]
    if variant == "total":
        vars(cross_validation)["fit_overheads"] = fit_overheads_total
    by_source: dict[str, list[float]] = {}
    models: dict[str, list[float]] = {}
    everything: list[float] = []
    time_ratio: list[float] = []
    print(f"== {variant}")
    try:
        for family in families:
            fold = fit_without(data, family)
            model = fold.model
            held = [r for r in fold.rows if r.family == family and r.measured_per_sequence_j]
            ratios = []
            for r in held:
                oh, power = model.overheads[r.engine], model.power_of(r.engine)
                e = float(predicted_per_sequence_j([r], oh, power)[0])
                ratio = e / float(r.measured_per_sequence_j or 1.0)
                ratios.append(ratio)
                by_source.setdefault(r.source, []).append(ratio)
                models.setdefault(f"{r.model_id} {r.gpu_id}", []).append(ratio)
                total = _steady_total(r, base, tput)
                if total is not None:
                    t_pred = float(predicted_total_s([r], oh)[0])
                    time_ratio.append(t_pred / total)
                    if rows:
                        _row_line(r, ratio, t_pred, total, e)
            everything += ratios
            v0 = model.overheads["vllm-v0"]
            print(
                _line(family, np.array(ratios)),
                f"| V0 step {1e3 * v0[1]:.1f} ms, per seq {1e6 * v0[2]:.0f} us, per worker "
                f"{1e3 * v0[4]:.1f} ms; kernel power {model.power[:3].round(2).tolist()}, "
                f"V0 host power {np.round(model.overhead_power['vllm-v0'], 2).tolist()}",
            )
    finally:
        vars(cross_validation)["fit_overheads"] = original
    print(_line("all", np.array(everything)))
    for source, rs in sorted(by_source.items()):
        print(_line(source[-2:], np.array(rs)))
    t = np.array(time_ratio)
    print(
        f"held-out v2 whole time / (batch x output / Token tput): MAPE "
        f"{100 * np.abs(t - 1).mean():.1f} %, median {np.median(t):.3f}"
    )
    worst = sorted(models.items(), key=lambda kv: -abs(np.log(np.median(kv[1]))))[:8]
    for name, rs in worst:
        print(f"   {name}: median energy pred/meas {np.median(rs):.2f} ({len(rs)} rows)")
    sys.stdout.flush()


def _row_line(r: EndToEndRow, ratio: float, t_pred: float, total: float, e: float) -> None:
    """A held-out v2 row: whole time and average power per GPU, predicted against measured
    (measured power = energy per request x batch / (batch x output / Token tput))."""
    measured_w = float(r.measured_per_sequence_j or 0.0) * r.batch_size / total / r.gpu_count
    predicted_w = e * r.batch_size / t_pred / r.gpu_count
    print(
        f"      {r.model_id} {r.gpu_id[:4]} x{r.gpu_count} batch {r.batch_size}: time "
        f"{t_pred / total:.2f}x, power {measured_w:.0f} W measured, {predicted_w:.0f} W "
        f"predicted per GPU, energy {ratio:.2f}x"
    )


def _steady_total(r: EndToEndRow, base: FoldData, tput: dict[str, float]) -> float | None:
    """batch x output / Token tput of held-out v2 row `r`, at the row's own (mapped) batch."""
    if r.source != "mlenergy-v2" or r.measured_per_sequence_j is None:
        return None
    total = TOTAL_BY_ENERGY.get(r.measured_per_sequence_j)
    if total is None:
        return None
    m = _BY_ENERGY[r.measured_per_sequence_j]
    return total * r.batch_size / m.batch_size


_BY_ENERGY: dict[float, EnergyMeasurement] = {}


def little(base: FoldData, tput: dict[str, float]) -> None:
    """Token tput x Avg TPOT / Avg BS per v2 text row, by task and server cap, with the
    share of a run's iterations that fall before its queue empties (a rough count:
    (requests - cap) x output / cap steady decode iterations, max_tokens drain iterations)."""
    requests = {"code": 164 * 10, "chat": 500 * 4}  # data_dup_factor of the H100 queue files
    drain = {"code": 512, "chat": 1024}  # the clients' max_tokens
    print("model | task | GPU | cap | Avg BS | out | ratio | steady-iteration share")
    ratios: list[float] = []
    shares: list[float] = []
    for m in base.energy:
        if m.source != "mlenergy-v2" or m.category != "llm_text_generation":
            continue
        if m.pipeline_parallel > 1:
            continue
        ratio = tput[m.row_ref] * m.time_per_output_token_s / m.batch_size
        steady = max(0.0, (requests[m.task] - m.batch_size) * m.output_tokens / m.batch_size)
        share = steady / (steady + drain[m.task])
        ratios.append(ratio)
        shares.append(share)
        print(
            f"{m.model_id} | {m.task} | {m.gpu_id[:4]} | {m.max_batch_size} | {m.batch_size} | "
            f"{m.output_tokens} | {ratio:.2f} | {share:.2f}"
        )
    r, s = np.array(ratios), np.array(shares)
    print(f"{len(r)} rows; correlation of ratio and steady share {np.corrcoef(r, s)[0, 1]:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--variant", choices=VARIANTS, action="append")
    parser.add_argument("--duty", action="store_true", help="add the duty-cycle host power")
    parser.add_argument("--little", action="store_true", help="print the Little's-law ratios")
    parser.add_argument("--family", action="append", help="only these held-out folds")
    parser.add_argument("--rows", action="store_true", help="print every held-out v2 row")
    args = parser.parse_args(argv)
    base = FoldData.load(args.data)
    tput = throughputs(args.data)
    for m in base.energy:
        if m.source == "mlenergy-v2":
            TOTAL_BY_ENERGY[m.per_sequence_gpu_j] = m.batch_size * m.output_tokens / tput[m.row_ref]
            _BY_ENERGY[m.per_sequence_gpu_j] = m
    if args.little:
        little(base, tput)
        return 0
    if args.duty:
        sys.path.insert(0, str(Path(__file__).parent))
        patch: Callable[[], Any] = __import__("host_power_duty_cycle").patch_fitting
        patch()
    for variant in args.variant or VARIANTS:
        run(base, variant, tput, tuple(args.family or FAMILIES), args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
