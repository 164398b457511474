"""Fit the `vllm`, `sglang` and `trtllm` engine profiles on aiconfigurator's measurements.

Each profile is the shared coefficients with the engine's own GEMM efficiencies
(`engine_gemm`, on its per-engine kernel tables), the speed of its block-scaled FP8 MoE kernel
(`engine_moe`, on its MoE tables) and its own decode host overheads, fitted on
its aggregated serving runs (silicon_sample_h100_h200.csv, one request joining the run's
concurrency, as shared/data/README.md maps them). With the kernel efficiencies fixed, a run's
time per output token is linear in the four decode overheads (fixed per step, per running
sequence, per decode kernel launch, per worker beyond the first); the service prices each run
once at zero overheads and once per overhead at a unit step, and the overheads are fitted on
those slopes (`end_to_end.fit_overheads_to`, as for the vLLM profiles). The prefill overhead
is vllm-v1's (a continuous batch's first token pays a decode step's host time, so these runs
cannot tell it); so are the host-overhead powers (the runs measure no energy). With the decode
overheads fixed, a run's time to first token is linear in the engine's two TTFT terms (the
share of arrivals that come in a wave, `ttft_wave_share`, and the host path per request,
`request_overhead_s`): the runs are priced once more at a unit wave share and both are fitted
on their measured TTFT (`fit_ttft_terms`).

Validated by refitting without each model family and without each GPU (H100, H200): see
`write_engine_report`.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy.optimize import least_squares

from offline.fitting.cross_validation import HeldOut, overhead_values
from offline.fitting.end_to_end import Overheads, fit_overheads_to, without_overheads
from offline.fitting.engine_gemm import (
    GemmSamples,
    fit_gemm_efficiencies,
    gemm_samples,
    predict_gemm_s,
)
from offline.fitting.engine_moe import block_fp8_expert_bytes
from offline.fitting.silicon_rows import (
    SILICON_CSV,
    SILICON_GPUS,
    point_estimator,
    silicon_request,
    unpriceable,
)
from service.catalog import GpuCatalog
from service.core.coefficients import CostModelCoefficients
from service.errors import ServiceError
from service.pricing.priced import PricedRequest

LATENCY_KEYS = ("time_per_output_token_s", "prefill_s")

FloatArray = npt.NDArray[np.float64]
ENGINES = ("vllm", "sglang", "trtllm")
UNIT_S = 1e-6
"""Step of each overhead when measuring the slopes [s]: small, the time is linear in it."""
_OVERHEADS = (
    "decode_step_overhead_s",
    "decode_overhead_per_sequence_s",
    "decode_kernel_launch_s",
    "decode_overhead_per_worker_s",
)


@dataclass(frozen=True, slots=True)
class Run:
    """One aggregated serving run: its CSV line and row."""

    line: int
    row: dict[str, str]

    @property
    def gpu(self) -> str:
        return SILICON_GPUS[self.row["system"]]

    @property
    def layout(self) -> str:
        """ "EP or attention DP" when the run uses either, else "TP only"."""
        parallel = max(int(self.row[c] or 1) for c in ("moe_ep_size", "attention_dp_size"))
        return "EP or attention DP" if parallel > 1 else "TP only"


@dataclass(frozen=True, slots=True)
class Slopes:
    """Runs priced with zero overheads (`tpot_s`, `ttft_s` [s]) and the slopes of both in
    each decode overhead of `_OVERHEADS` ([runs, 4], s per s), plus the runs' labels."""

    tpot_s: FloatArray
    ttft_s: FloatArray
    tpot_slope: FloatArray
    ttft_slope: FloatArray
    measured_tpot_s: FloatArray
    measured_ttft_s: FloatArray
    family: list[str]
    gpu: list[str]
    launch_s: float
    layout: list[str]
    lines: list[int]  # each run's CSV line
    wave_s: FloatArray  # TTFT per unit ttft_wave_share [s]; 0 in the static reading
    continuous: bool  # whether the runs are read as joining a server (else static batches)

    def subset(self, mask: npt.NDArray[np.bool_]) -> Slopes:
        pick = np.flatnonzero(mask)
        return Slopes(
            self.tpot_s[pick],
            self.ttft_s[pick],
            self.tpot_slope[pick],
            self.ttft_slope[pick],
            self.measured_tpot_s[pick],
            self.measured_ttft_s[pick],
            [self.family[i] for i in pick],
            [self.gpu[i] for i in pick],
            self.launch_s,
            [self.layout[i] for i in pick],
            [self.lines[i] for i in pick],
            self.wave_s[pick],
            self.continuous,
        )

    def predicted(
        self, overheads: Overheads, ttft_terms: TtftTerms = (0.0, 0.0)
    ) -> tuple[FloatArray, FloatArray]:
        """(TPOT, TTFT) [s] of every run under decode `overheads` (end_to_end.Overheads) and
        `ttft_terms` (wave share, request overhead [s]; continuous reading only)."""
        step = np.array([overheads[1], overheads[2], overheads[3] - self.launch_s, overheads[4]])
        ttft = self.ttft_s + self.ttft_slope @ step
        if self.continuous:
            ttft = ttft + ttft_terms[0] * self.wave_s + ttft_terms[1]
        return self.tpot_s + self.tpot_slope @ step, ttft


TtftTerms = tuple[float, float]
"""An engine's (ttft_wave_share [-], request_overhead_s [s])."""
NO_TTFT_TERMS: TtftTerms = (0.0, 0.0)


def table_folder(gpu: str) -> str:
    """The kernel tables' folder of catalogue GPU `gpu` (e.g. "h200_sxm")."""
    return {v: k for k, v in SILICON_GPUS.items()}[gpu]


ONE_NODE_GPUS = 8
"""GPUs of one HGX H100/H200 baseboard, one NVLink domain. Runs on more (tensor or data
degree 64) span nodes: the inter-node network is not in this fit's GPU figures, and those
runs' times would be read as engine overheads."""


def engine_runs(data_dir: Path, engine: str) -> list[Run]:
    """The aggregated single-node runs of `engine` the service can price."""
    with (data_dir / SILICON_CSV).open(newline="", encoding="utf-8") as handle:
        return [
            Run(line, row)
            for line, row in enumerate(csv.DictReader(handle), start=2)
            if row["backend"] == engine and not unpriceable(row) and _gpus(row) <= ONE_NODE_GPUS
        ]


def _gpus(row: dict[str, str]) -> int:
    return int(row["tp_size"]) * int(row["attention_dp_size"] or 1)


def measured_versions(runs: list[Run]) -> list[str]:
    """The engine versions of `runs` (blank ones dropped)."""
    return sorted({r.row["backend_version"] for r in runs if r.row["backend_version"]})


def kernel_coefficients(
    shared: CostModelCoefficients, samples: GemmSamples, expert_bytes: float = 2.0
) -> CostModelCoefficients:
    """`shared` with the GEMM efficiencies fitted on `samples`, block-scaled FP8 experts timed
    at `expert_bytes` per element (`engine_moe`) and no host overheads."""
    fitted = fit_gemm_efficiencies(samples)
    roofline = replace(
        shared.roofline,
        tensor_efficiency=fitted["tensor_efficiency"],
        memory_efficiency=fitted["memory_efficiency"],
        block_fp8_expert_bytes=expert_bytes,
    )
    return without_overheads(replace(shared, roofline=roofline))


def priced_latency(
    priced: dict[str, list[PricedRequest | ServiceError]], reference: str
) -> tuple[list[int], dict[str, FloatArray]]:
    """The runs `reference`'s pricing did not refuse, and each variant's [runs, 2] time per
    output token and prefill [s] for them (the same requests priced under each variant)."""
    keep = [i for i, p in enumerate(priced[reference]) if not isinstance(p, ServiceError)]
    latency = {
        name: np.array([[_latency(results[i], key) for key in LATENCY_KEYS] for i in keep])
        for name, results in priced.items()
    }
    return keep, latency


def _latency(result: PricedRequest | ServiceError, key: str) -> float:
    assert not isinstance(result, ServiceError)  # kept: priced under the reference variant
    value: float = result.document.as_dict()["latency"][key]
    return value


def run_slopes(
    runs: list[Run], engine: str, zero: CostModelCoefficients, *, static: bool = False
) -> Slopes:
    """`runs` priced by the service at zero overheads and at a unit step of each overhead;
    runs the service refuses are dropped. `static`: read as static batches of their
    concurrency (silicon_request)."""
    variants = {"zero": zero}
    for name in _OVERHEADS:
        step = getattr(zero.roofline, name) + UNIT_S
        variants[name] = replace(zero, roofline=replace(zero.roofline, **{name: step}))
    variants["wave"] = replace(zero, roofline=replace(zero.roofline, ttft_wave_share=1.0))
    priced = {}
    for name, coefficients in variants.items():
        estimator = point_estimator(coefficients={"vllm-v1": zero, engine: coefficients})
        requests = [silicon_request(r.row, engine, static=static) for r in runs]
        priced[name] = estimator.price(requests)
    keep, latency = priced_latency(priced, "zero")
    base = latency["zero"]
    slope = np.stack([(latency[n] - base) / UNIT_S for n in _OVERHEADS], axis=2)  # [runs, 2, 4]
    estimator = point_estimator()
    return Slopes(
        tpot_s=base[:, 0],
        ttft_s=base[:, 1],
        tpot_slope=slope[:, 0, :],
        ttft_slope=slope[:, 1, :],
        measured_tpot_s=np.array([float(runs[i].row["silicon_tpot_ms"]) / 1e3 for i in keep]),
        measured_ttft_s=np.array([float(runs[i].row["silicon_ttft_ms"]) / 1e3 for i in keep]),
        family=[estimator.model_family(runs[i].row["model_path"]) for i in keep],
        gpu=[runs[i].gpu for i in keep],
        launch_s=zero.roofline.decode_kernel_launch_s,
        layout=[runs[i].layout for i in keep],
        lines=[runs[i].line for i in keep],
        wave_s=latency["wave"][:, 1] - base[:, 1],
        continuous=not static,
    )


def fit_engine_overheads(slopes: Slopes, prefill_overhead_s: float) -> Overheads:
    """Decode overheads minimising the robust log error of TPOT over `slopes`' runs."""
    return fit_overheads_to(
        lambda o: np.log(slopes.predicted(o)[0] / slopes.measured_tpot_s),
        prefill_overhead_s,
        per_worker=True,
    )


TTFT_TERM_SETS: dict[str, tuple[bool, bool]] = {
    "both": (True, True),
    "wave": (True, False),
    "host": (False, True),
    "none": (False, False),
}
"""Which TTFT terms (wave share, request overhead) a fit may use, by name."""


def fit_ttft_terms(
    slopes: Slopes, overheads: Overheads, terms: tuple[bool, bool] = (True, True)
) -> TtftTerms:
    """The wave share (0 to 1) and request overhead (0 to 1 s) minimising the robust log
    error of TTFT over `slopes`' runs under decode `overheads`; none in the static reading.
    `terms`: which of the two are fitted (the other stays 0)."""
    if not slopes.continuous or not len(slopes.ttft_s) or not any(terms):
        return NO_TTFT_TERMS
    base = slopes.predicted(overheads)[1]
    measured = slopes.measured_ttft_s
    columns = [
        c for c, used in zip((slopes.wave_s, np.ones_like(base)), terms, strict=True) if used
    ]

    def residuals(x: FloatArray) -> FloatArray:
        return np.asarray(
            np.log((base + sum(a * c for a, c in zip(x, columns, strict=True))) / measured)
        )

    start, n = [0.1, 0.01], len(columns)
    fitted = least_squares(
        residuals,
        [v for v, used in zip(start, terms, strict=True) if used],
        bounds=([0.0] * n, [1.0] * n),
        loss="soft_l1",
        f_scale=0.3,
    )
    values = iter(fitted.x.tolist())
    return tuple(next(values) if used else 0.0 for used in terms)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """An engine's fitted kernel efficiencies, overheads and measured versions."""

    coefficients: CostModelCoefficients
    overheads: Overheads
    versions: list[str]
    ttft_terms: TtftTerms = NO_TTFT_TERMS

    def values(self) -> dict[str, float]:
        """The profile's entry of the coefficients file (less its host powers)."""
        roofline = self.coefficients.roofline
        return {
            "tensor_efficiency": roofline.tensor_efficiency,
            "memory_efficiency": roofline.memory_efficiency,
            "block_fp8_expert_bytes": roofline.block_fp8_expert_bytes,
            **overhead_values(self.overheads),
            "ttft_wave_share": self.ttft_terms[0],
            "request_overhead_s": self.ttft_terms[1],
        }


def fit_engine(
    data_dir: Path, engine: str, shared: CostModelCoefficients, gpus: GpuCatalog, held: HeldOut
) -> EngineProfile:
    """`engine`'s profile on all its measurements; its held-out predictions (without each
    family, without each GPU) and the shared profile's on the same runs added to `held`."""
    runs = engine_runs(data_dir, engine)
    samples = gemm_samples(data_dir, engine, gpus)
    prefill_s = shared.roofline.prefill_overhead_s
    zero = kernel_coefficients(shared, samples, block_fp8_expert_bytes(data_dir, engine))
    slopes = run_slopes(runs, engine, zero)
    overheads = fit_engine_overheads(slopes, prefill_s)
    _held_out_families(engine, slopes, prefill_s, held)
    _held_out_gpus(engine, runs, samples, shared, held, data_dir)
    _shared_profile(engine, runs, shared, held)
    terms = fit_ttft_terms(slopes, overheads)
    return EngineProfile(zero, overheads, measured_versions(runs), terms)


def _add(held: HeldOut, quantity: str, slopes: Slopes, o: Overheads, labels: list[str],
         terms: TtftTerms = NO_TTFT_TERMS) -> None:  # fmt: skip
    tpot, ttft = slopes.predicted(o, terms)
    held.add(f"tpot:{quantity}", tpot, slopes.measured_tpot_s, labels)
    held.add(f"ttft:{quantity}", ttft, slopes.measured_ttft_s, labels)


def _held_out_families(engine: str, slopes: Slopes, prefill_s: float, held: HeldOut) -> None:
    families = np.array(slopes.family)
    for family in sorted(set(slopes.family)):
        train = slopes.subset(families != family)
        if not len(train.tpot_s):
            continue
        test = slopes.subset(families == family)
        overheads = fit_engine_overheads(train, prefill_s)
        terms = fit_ttft_terms(train, overheads)
        _add(held, f"{engine}:family", test, overheads, test.family, terms)
        _add(held, f"{engine}:family-layout", test, overheads, test.layout, terms)


def _held_out_gpus(
    engine: str,
    runs: list[Run],
    samples: GemmSamples,
    shared: CostModelCoefficients,
    held: HeldOut,
    data_dir: Path,
) -> None:
    kernel_gpus = np.array(samples.gpu_id)
    for gpu in sorted({r.gpu for r in runs}):
        expert_bytes = block_fp8_expert_bytes(data_dir, engine, without_gpu=table_folder(gpu))
        zero = kernel_coefficients(shared, samples.subset(kernel_gpus != gpu), expert_bytes)
        slopes = run_slopes(runs, engine, zero)
        gpus = np.array(slopes.gpu)
        if (gpus != gpu).any():
            train = slopes.subset(gpus != gpu)
            overheads = fit_engine_overheads(train, shared.roofline.prefill_overhead_s)
            test = slopes.subset(gpus == gpu)
            _add(held, f"{engine}:gpu", test, overheads, test.gpu, fit_ttft_terms(train, overheads))
        gemm = samples.subset(kernel_gpus == gpu)
        fitted = fit_gemm_efficiencies(samples.subset(kernel_gpus != gpu))
        efficiencies = np.array([fitted["tensor_efficiency"], fitted["memory_efficiency"]])
        held.add(
            f"gemm:{engine}:gpu",
            predict_gemm_s(gemm, efficiencies, fitted["gemm_call_s"]),
            gemm.measured_s,
            gemm.gpu_id,
        )


def _shared_profile(
    engine: str, runs: list[Run], shared: CostModelCoefficients, held: HeldOut
) -> None:
    """The same runs priced with vllm-v1 (what the service did before these profiles)."""
    estimator = point_estimator(coefficients={"vllm-v1": shared})
    priced = estimator.price([silicon_request(r.row) for r in runs])
    pairs = [
        (p.document.as_dict()["latency"], r)
        for p, r in zip(priced, runs, strict=True)
        if not isinstance(p, ServiceError)
    ]
    labels = [estimator.model_family(r.row["model_path"]) for _, r in pairs]
    for quantity, key, column in (
        ("tpot", "time_per_output_token_s", "silicon_tpot_ms"),
        ("ttft", "prefill_s", "silicon_ttft_ms"),
    ):
        held.add(
            f"{quantity}:{engine}:vllm-v1",
            np.array([latency[key] for latency, _ in pairs]),
            np.array([float(r.row[column]) / 1e3 for _, r in pairs]),
            labels,
        )
