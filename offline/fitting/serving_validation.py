"""Grouped validation of the serving estimate: the continuous-batch reading against the old
static one, on the same rows, with coefficients refitted without each row's group.

    python -m offline.fitting.serving_validation --data ../shared/data \
        --out bench/results/serving_validation.md      # ~40 min
    python -m offline.fitting.serving_validation --data ../shared/data --silicon-only \
        --out /tmp/silicon_validation.md               # aiconfigurator's runs alone

Readings of one measured row (shared/data/README.md):
- `continuous`: one request (batch 1) joining the row's running sequences
  (`concurrent_sequences`), as the service quotes it (request_inputs.mlenergy_inputs,
  silicon_rows.silicon_request);
- `static`: the older reading, a static batch of that many sequences running alone
  (continuous_energy.static_reading), memory scheduled as the service quotes it.
Each reading is priced with coefficients refitted, on that reading, without the row's group
(the old model against the new, both held out); a row counts only where both price it. Splits:
- `family`: ML.ENERGY rows with the cost model refitted without the family
  (family_folds.fit_without); aiconfigurator runs with their engine's decode overheads and, in
  the continuous reading, its TTFT terms (wave share, request overhead) refitted without it
  (engine_profiles, the kernel efficiencies on its GEMM tables kept);
- `gpu`: the same without the GPU (H100, H200, A100; for the runs, the GEMM and MoE tables of
  that GPU left out too);
- `engine`: ML.ENERGY v2 (vLLM 0.5.4) priced with the vllm-v1 profile refitted without them and
  v3 (vLLM 0.11.1) with the vllm-v0 one; aiconfigurator runs with the vllm-v1 profile (what a
  request without `serving.engine`, or for an engine without measurements, gets), its kernels
  and decode overheads fitted on no aiconfigurator run and its TTFT terms chosen and fitted
  without the held-out engine's runs (default_ttft: on vLLM's runs; vLLM's own runs priced with
  terms fitted on SGLang's and TensorRT-LLM's).
Quantities: energy per request (ML.ENERGY: `per_sequence_gpu_j`), time per output token (ML.ENERGY
v2 mean TPOT, v3 median ITL, aiconfigurator TPOT) and time to first token (aiconfigurator TTFT
against `prefill_s`; ML.ENERGY publishes none). The disaggregated runs (`mode = disagg`) come last,
in their own section (offline.fitting.disagg_validation).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from offline.fitting.cross_validation import Refit
from offline.fitting.datasets import DEFAULT_DATA_DIR, EnergyMeasurement
from offline.fitting.default_ttft import (
    DEFAULT_TTFT_ENGINES,
    fit_default_ttft_terms,
    with_ttft_terms,
)
from offline.fitting.disagg_validation import disagg_section
from offline.fitting.engine_gemm import gemm_samples
from offline.fitting.engine_moe import block_fp8_expert_bytes
from offline.fitting.engine_profiles import (
    ENGINES,
    Run,
    Slopes,
    engine_runs,
    fit_engine_overheads,
    fit_ttft_terms,
    kernel_coefficients,
    run_slopes,
    table_folder,
)
from offline.fitting.family_folds import (
    FoldData,
    engine_of_row,
    fit_without,
    fit_without_group,
    gpu_of_row,
)
from offline.fitting.metrics import accuracy
from offline.fitting.request_inputs import RequestInputs, mlenergy_inputs
from offline.fitting.silicon_rows import point_estimator, silicon_request
from service.catalog import load_gpu_catalog
from service.catalog.engines import DEFAULT_ENGINE, load_engine_coefficients
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError
from service.core.estimate import estimate_request
from service.errors import ServiceError
from service.pricing.continuous_energy import static_reading

READINGS = ("static", "continuous")
SPLITS = ("family", "gpu", "engine")
QUANTITIES = ("energy", "tpot", "ttft")
OTHER_VLLM = {"vllm-v0": "vllm-v1", "vllm-v1": "vllm-v0"}
"""The profile an ML.ENERGY row is priced with when its own engine is held out."""


@dataclass(frozen=True, slots=True)
class Priced:
    """One measured quantity of one row under one reading, predicted without the row's group."""

    source: str  # "mlenergy-v2", "mlenergy-v3" or "aiconfigurator"
    quantity: str  # "energy" [J], "tpot" [s] or "ttft" [s]
    split: str  # "family", "gpu" or "engine"
    group: str  # the group held out
    reading: str  # "static" or "continuous"
    predicted: float
    measured: float
    row: str  # the measured row's reference
    engine: str = ""  # the engine that ran the row (aiconfigurator runs)


def mlenergy_rows(data: FoldData, readings: tuple[str, ...] = READINGS) -> Iterator[Priced]:
    """ML.ENERGY energy and TPOT under `readings`, every split, each reading refitted on
    itself (one reading per process halves the wall time)."""
    inputs = [(m, mlenergy_inputs(m, data.models, data.gpus)) for m in data.energy]
    rows = [(m, i) for m, i in inputs if not isinstance(i, str)]
    gpu_ids = np.array(data.samples.gpu_id)
    kept = np.ones(len(gpu_ids), dtype=bool)
    for reading in readings:
        fold_data = replace(data, static=reading == "static")
        for family in sorted({i.family for _, i in rows}):
            print(f"{reading}: family {family} ...", file=sys.stderr)
            fold = fit_without(fold_data, family)
            chosen = [(m, i) for m, i in rows if i.family == family]
            yield from _held_out("family", family, fold, chosen, reading)
        for gpu in sorted({m.gpu_id for m, _ in rows}):
            print(f"{reading}: gpu {gpu} ...", file=sys.stderr)
            fold = fit_without_group(fold_data, gpu_of_row, gpu, gpu_ids != gpu, "GPU")
            yield from _held_out(
                "gpu", gpu, fold, [(m, i) for m, i in rows if m.gpu_id == gpu], reading
            )
        for engine in sorted(OTHER_VLLM):
            print(f"{reading}: engine {engine} ...", file=sys.stderr)
            fold = fit_without_group(fold_data, engine_of_row, engine, kept, "engine")
            chosen = [(m, i) for m, i in rows if i.engine == engine]
            yield from _held_out("engine", engine, fold, chosen, reading)


def _held_out(
    split: str,
    group: str,
    fold: Refit,
    chosen: list[tuple[EnergyMeasurement, RequestInputs]],
    reading: str,
) -> Iterator[Priced]:
    fitted = fold.model.overheads
    for m, i in chosen:
        engine = i.engine if i.engine in fitted else OTHER_VLLM[i.engine]
        coefficients = fold.model.coefficients(fold.coefficients, engine)
        workload = static_reading(i.workload) if reading == "static" else i.workload
        try:
            e = estimate_request(i.arch, workload, i.deployment, coefficients)
        except CostModelError:
            continue  # refused by the service
        yield Priced(m.source, "energy", split, group, reading, e.per_sequence_gpu_j,
                     m.per_sequence_gpu_j, m.row_ref)  # fmt: skip
        yield Priced(m.source, "tpot", split, group, reading, e.time_per_output_token_s,
                     m.time_per_output_token_s, m.row_ref)  # fmt: skip


def silicon_rows(data_dir: Path) -> Iterator[Priced]:
    """aiconfigurator's aggregated runs: TPOT and TTFT under both readings, every split."""
    shared = load_engine_coefficients()[DEFAULT_ENGINE]
    prefill_s = shared.roofline.prefill_overhead_s
    gpus = load_gpu_catalog()
    for engine in ENGINES:
        print(f"aiconfigurator {engine} ...", file=sys.stderr)
        runs = engine_runs(data_dir, engine)
        samples = gemm_samples(data_dir, engine, gpus)
        expert_bytes = block_fp8_expert_bytes(data_dir, engine)
        both = _both(runs, engine, kernel_coefficients(shared, samples, expert_bytes))
        families = np.array(both["continuous"].family)
        for family in sorted(set(families)):
            if (families != family).any():
                yield from _runs("family", family, both, families == family, prefill_s, engine)
        kernel_gpus = np.array(samples.gpu_id)
        for gpu in sorted({r.gpu for r in runs}):
            expert_bytes = block_fp8_expert_bytes(data_dir, engine, table_folder(gpu))
            zero = kernel_coefficients(shared, samples.subset(kernel_gpus != gpu), expert_bytes)
            fold = _both(runs, engine, zero)
            on = np.array(fold["continuous"].gpu) == gpu
            if (~on).any():
                yield from _runs("gpu", gpu, fold, on, prefill_s, engine)
        yield from _default_profile(runs, engine, data_dir, shared)


def _both(runs: list[Run], engine: str, zero: CostModelCoefficients) -> dict[str, Slopes]:
    """Both readings' slopes over the runs priced under both."""
    slopes = {r: run_slopes(runs, engine, zero, static=r == "static") for r in READINGS}
    common = set(slopes["static"].lines) & set(slopes["continuous"].lines)
    return {r: s.subset(np.array([line in common for line in s.lines])) for r, s in slopes.items()}


def _runs(
    split: str,
    group: str,
    slopes: dict[str, Slopes],
    mask: npt.NDArray[np.bool_],
    prefill_s: float,
    engine: str,
) -> Iterator[Priced]:
    """The runs of `mask` under each reading, with decode overheads fitted on that reading's
    other runs."""
    for reading, s in slopes.items():
        train = s.subset(~mask)
        overheads = fit_engine_overheads(train, prefill_s)
        test = s.subset(mask)
        tpot, ttft = test.predicted(overheads, fit_ttft_terms(train, overheads))
        for quantity, predicted, measured in (
            ("tpot", tpot, test.measured_tpot_s),
            ("ttft", ttft, test.measured_ttft_s),
        ):
            for p, m, line in zip(predicted.tolist(), measured.tolist(), test.lines, strict=True):
                yield Priced("aiconfigurator", quantity, split, group, reading, p, m, str(line),
                             engine)  # fmt: skip


def _default_profile(
    runs: list[Run], engine: str, data_dir: Path, shared: CostModelCoefficients
) -> Iterator[Priced]:
    """`engine`'s runs priced with the default profile, its TTFT terms chosen and fitted
    without `engine`'s runs (default_ttft: on vLLM's; with vLLM held out, on the others')."""
    training = tuple(e for e in DEFAULT_TTFT_ENGINES if e != engine) or tuple(
        e for e in ENGINES if e != engine
    )
    _, terms = fit_default_ttft_terms(data_dir, shared, training)
    estimator = point_estimator(coefficients={DEFAULT_ENGINE: with_ttft_terms(shared, terms)})
    priced = {
        r: estimator.price([silicon_request(run.row, static=r == "static") for run in runs])
        for r in READINGS
    }
    for i, run in enumerate(runs):
        results = {r: priced[r][i] for r in READINGS}
        if any(isinstance(x, ServiceError) for x in results.values()):
            continue
        for reading, result in results.items():
            latency = result.document.as_dict()["latency"]  # type: ignore[union-attr]
            for quantity, key, column in (
                ("tpot", "time_per_output_token_s", "silicon_tpot_ms"),
                ("ttft", "prefill_s", "silicon_ttft_ms"),
            ):
                measured = float(run.row[column]) / 1e3
                yield Priced("aiconfigurator", quantity, "engine", engine, reading,
                             float(latency[key]), measured, str(run.line), engine)  # fmt: skip


def paired(rows: list[Priced]) -> list[Priced]:
    """The rows priced under both readings in the same split and group."""
    keys = [(r.split, r.group, r.source, r.quantity, r.row) for r in rows]
    readings: dict[tuple[str, ...], set[str]] = {}
    for key, r in zip(keys, rows, strict=True):
        readings.setdefault(key, set()).add(r.reading)
    return [r for key, r in zip(keys, rows, strict=True) if len(readings[key]) == len(READINGS)]


def _table(rows: list[Priced], key: Callable[[Priced], str]) -> list[str]:
    lines = [
        "| held out | quantity | source | reading | rows | MAPE % | within 10 % | within 30 % "
        "| median pred/meas |",
        "|---|---|---|---|--:|--:|--:|--:|--:|",
    ]
    groups = sorted({(key(r), r.quantity, r.source) for r in rows})
    for group, quantity, source in groups:
        for reading in READINGS:
            chosen = [
                r
                for r in rows
                if (key(r), r.quantity, r.source, r.reading) == (group, quantity, source, reading)
            ]
            if not chosen:
                continue
            a = accuracy(
                np.array([r.predicted for r in chosen]), np.array([r.measured for r in chosen])
            )
            lines.append(
                f"| {group} | {quantity} | {source} | {reading} | " + " | ".join(a.as_row()) + " |"
            )
    return lines


def report(data_dir: Path, *, silicon_only: bool = False) -> str:
    """The markdown report (`silicon_only`: aiconfigurator's runs alone, no cost-model refit),
    the disaggregated runs last (disagg_validation: priced, never fitted on)."""
    if silicon_only:
        rendered = render(paired(list(silicon_rows(data_dir))), silicon_only=True)
    else:
        data = FoldData.load(data_dir)
        rendered = render(paired([*mlenergy_rows(data), *silicon_rows(data_dir)]))
    return rendered + "\n".join(disagg_section(data_dir))


def render(rows: list[Priced], *, silicon_only: bool = False) -> str:
    """The markdown report of priced rows (`paired`; `silicon_only`: aiconfigurator's alone)."""
    version = load_engine_coefficients()[DEFAULT_ENGINE].version
    flag, data = (
        (" --silicon-only", "aiconfigurator's silicon serving runs and GEMM tables (NVIDIA, "
         "Apache-2.0)")
        if silicon_only
        else ("", "ML.ENERGY leaderboard v2 and v3 (Apache-2.0), aiconfigurator's silicon serving "
              "runs and GEMM tables (NVIDIA, Apache-2.0), Vidur and Splitwise (MIT) in the refits")
    )  # fmt: skip
    lines = [
        "# Serving validation: continuous batch vs static batch, grouped splits",
        "",
        f"Made by `python -m offline.fitting.serving_validation --data ../shared/data{flag}` at "
        f"{datetime.now(UTC):%Y-%m-%dT%H:%MZ} (coefficients `{version}` as the base of every "
        f"refit). The analytical estimate alone (no learned correction). Data: {data}, read "
        "from `../shared/data`.",
        "",
        __doc__.split("\n\n", 2)[2].strip() if __doc__ else "",
        "",
    ]
    for split in SPLITS:
        chosen = [r for r in rows if r.split == split]
        lines += [f"## Leave one {split} out, all groups", ""]
        lines += _table(chosen, lambda r: "all")
        lines += ["", f"## Leave one {split} out, by group", ""]
        lines += _table(chosen, lambda r: r.group)
        if split != "engine":
            lines += ["", f"## Leave one {split} out, aiconfigurator runs by engine", ""]
            lines += _table([r for r in chosen if r.engine], lambda r: r.engine)
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=Path("bench/results/serving_validation.md"))
    parser.add_argument(
        "--silicon-only",
        action="store_true",
        help="aiconfigurator's serving runs alone (minutes, not the ML.ENERGY refits' ~40)",
    )
    args = parser.parse_args()
    args.out.write_text(report(args.data, silicon_only=args.silicon_only), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
