"""A fitted calibration: per GPU and serving engine, refitted physical coefficients, and per GPU
x model family, a shrunk residual energy factor on top of them.

Scopes. A GPU's fit (`GpuFit`, keyed by GPU and engine) applies to quotes of that GPU and
engine only, and only when it is active: an H100 calibration never moves an A100 quote, and a
fit is active only with enough observations and an improvement on held-out ones (its `reason`
says which failed). The fit moves a quote by the model's own ratio under the refitted
coefficients (service.pricing.calibration.physics): energy and latency alike.

Family segments. The model's residual bias also has an architecture part (kernel mix,
attention and MoE shapes the model prices imperfectly) that no hardware coefficient
captures. After the GPU's refit, each GPU x family segment keeps a log-space offset ``delta``
(factor ``exp(delta)``) of its mean remaining log ratio, shrunk toward none by the
empirical-Bayes / James-Stein weight ``w = n / (n + k)``: with residual noise sigma per
observation and a spread tau of true segment biases, the posterior mean under a normal prior
has exactly this form with ``k = sigma^2 / tau^2``; the default k = 10 corresponds to sigma ~
0.25 against tau ~ 0.08. Worked: three points of remaining ratio 2 move their segment by w =
3/13 of ln 2 (x1.17), three hundred by 300/310 (x1.95). The pooled `global_correction` is
reported (its n and mean log ratio) and never applied: no correction crosses GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service.pricing.calibration.calibrated_intervals import (
    ResidualQuantiles,
    calibrated_evidence,
)
from service.pricing.calibration.physical_terms import PhysicalTerms
from service.pricing.calibration.physics import PARAMETERS, Factors, factors_many
from service.pricing.evidence import Evidence

GLOBAL_SEGMENT = ("*", "*")


@dataclass(frozen=True, slots=True)
class SegmentCorrection:
    """One segment's fitted correction: `n` observations of mean log ratio `mean_log_ratio`,
    weight `weight` = n / (n + k), shrunk offset `log_factor`, multiplier `factor`."""

    gpu: str
    family: str
    n: int
    mean_log_ratio: float
    weight: float
    log_factor: float

    @property
    def factor(self) -> float:
        return math.exp(self.log_factor)

    def to_payload(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "family": self.family,
            "n": self.n,
            "mean_log_ratio": self.mean_log_ratio,
            "weight": self.weight,
            "log_factor": self.log_factor,
            "factor": self.factor,
        }

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> SegmentCorrection:
        return cls(
            gpu=str(data["gpu"]),
            family=str(data["family"]),
            n=int(data["n"]),
            mean_log_ratio=float(data["mean_log_ratio"]),
            weight=float(data["weight"]),
            log_factor=float(data["log_factor"]),
        )


@dataclass(frozen=True, slots=True)
class HeldOutError:
    """Mean absolute percentage errors [fraction] on held-out observations, before and after
    the calibration (None: nothing of that kind was scored)."""

    energy_before: float | None = None
    energy_after: float | None = None
    latency_before: float | None = None
    latency_after: float | None = None

    def to_payload(self) -> dict[str, float | None]:
        return {
            "energy_mape_before": self.energy_before,
            "energy_mape_after": self.energy_after,
            "latency_mape_before": self.latency_before,
            "latency_mape_after": self.latency_after,
        }

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> HeldOutError:
        return cls(
            data.get("energy_mape_before"),
            data.get("energy_mape_after"),
            data.get("latency_mape_before"),
            data.get("latency_mape_after"),
        )


@dataclass(frozen=True, slots=True)
class GpuFit:
    """One GPU's (under one engine) refitted coefficients: `theta`, log multipliers of the
    prior figures in the order of physics.PARAMETERS, fitted on `n` observations (`n_latency`
    of them with total time); `held_out` its k-fold error; `active` whether quotes use it,
    `reason` why (not); `quantiles` its k-fold residuals' quantiles by quantity ("energy",
    "total"), which bound the quotes it moves (calibrated_intervals)."""

    gpu: str
    engine: str
    n: int
    n_latency: int
    theta: tuple[float, ...]
    held_out: HeldOutError
    active: bool
    reason: str
    quantiles: Mapping[str, ResidualQuantiles] = field(default_factory=dict)

    @property
    def theta_array(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        return np.array(self.theta, dtype=np.float64)

    @property
    def multipliers(self) -> dict[str, float]:
        """Each refitted coefficient's multiplier of its prior figure (exp theta)."""
        return {name: math.exp(t) for name, t in zip(PARAMETERS, self.theta, strict=True)}

    def to_payload(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "engine": self.engine,
            "n": self.n,
            "n_latency": self.n_latency,
            "theta": list(self.theta),
            "held_out": self.held_out.to_payload(),
            "active": self.active,
            "reason": self.reason,
            "quantiles": [q.to_payload() for q in self.quantiles.values()],
        }

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> GpuFit:
        return cls(
            gpu=str(data["gpu"]),
            engine=str(data["engine"]),
            n=int(data["n"]),
            n_latency=int(data["n_latency"]),
            theta=tuple(float(t) for t in data["theta"]),
            held_out=HeldOutError.from_payload(data.get("held_out", {})),
            active=bool(data["active"]),
            reason=str(data["reason"]),
            quantiles={
                q.quantity: q
                for q in (ResidualQuantiles.from_payload(i) for i in data.get("quantiles", []))
            },
        )


@dataclass(frozen=True, slots=True)
class Corrections:
    """Every GPU x engine refit, every GPU x family segment that had observations, and the
    pooled statistics (`global_correction`, never applied)."""

    shrinkage_k: float
    global_correction: SegmentCorrection
    segments: Mapping[tuple[str, str], SegmentCorrection]
    fits: Mapping[tuple[str, str], GpuFit] = field(default_factory=dict)

    @classmethod
    def none(cls, shrinkage_k: float) -> Corrections:
        return cls(shrinkage_k, SegmentCorrection(*GLOBAL_SEGMENT, 0, 0.0, 0.0, 0.0), {})

    def factor_for(self, gpu: str, family: str) -> float:
        """The family segment's residual energy multiplier on `gpu` (1 without observations)."""
        segment = self.segments.get((gpu, family))
        return segment.factor if segment is not None else 1.0

    def physical_factors(
        self, gpu: str, engine: str, terms: Callable[[], PhysicalTerms]
    ) -> list[Factors] | None:
        """How this calibration's refit moves each request of `terms` (read only when a fit
        applies) on `gpu` under `engine`; None when no active fit covers that GPU and engine."""
        fit = self.fits.get((gpu, engine))
        if fit is None or not fit.active:
            return None
        return factors_many(terms(), fit.theta_array)

    def with_family(self, moved: Factors, gpu: str, family: str) -> Factors:
        """`moved` with the GPU x family segment's residual energy factor on top."""
        energy = moved.energy * self.factor_for(gpu, family)
        return Factors(energy, moved.prefill, moved.decode)

    def to_payload(self) -> dict[str, Any]:
        return {
            "shrinkage_k": self.shrinkage_k,
            "global": self.global_correction.to_payload(),
            "segments": [s.to_payload() for s in self.segments.values()],
            "fits": [f.to_payload() for f in self.fits.values()],
        }

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> Corrections:
        segments = [SegmentCorrection.from_payload(s) for s in data["segments"]]
        return cls(
            shrinkage_k=float(data["shrinkage_k"]),
            global_correction=SegmentCorrection.from_payload(data["global"]),
            segments={(s.gpu, s.family): s for s in segments},
            fits={
                (f.gpu, f.engine): f
                for f in (GpuFit.from_payload(item) for item in data.get("fits", []))
            },
        )


@dataclass(frozen=True, slots=True)
class ActiveCalibration:
    """A stored calibration as the estimator applies it: its id, the model version whose
    predictions it corrects (it applies to no other), and its corrections."""

    calibration_id: str
    model_version: str
    corrections: Corrections

    def evidence(self, evidence: Evidence, gpu: str, engine: str) -> Evidence:
        """`evidence` of a quote on `gpu` under `engine`, with the intervals and validation of
        this calibration's fit where an active one moved it (calibrated_intervals)."""
        fit = self.corrections.fits.get((gpu, engine))
        if fit is None or not fit.active:
            return evidence
        return calibrated_evidence(evidence, self.calibration_id, fit.n, fit.quantiles)
