"""A fitted calibration: multiplicative corrections of GPU energy per segment.

Segments are **GPU type x model family** (``("H100-SXM5-80GB", "llama")``), with one global
correction as the fallback for segments without observations. Why these: the analytical and
learned models' residual bias is dominated by the hardware (achieved power and efficiency vary
per GPU and per system, which observations of a deployment capture) and by the architecture
family (kernel mix, attention and MoE shapes the model prices imperfectly); both are known at
quote time for every request. Finer keys (phase mix, batch-size bands) would thin the data
below what a per-segment mean can use; the phase mix also moves with batch size and lengths,
which the models already see.

Every correction is a log-space offset ``delta`` (factor ``exp(delta)``) shrunk by an
empirical-Bayes / James-Stein weight ``w = n / (n + k)``: the global one toward no correction
(``delta_global = w_N * mean(all log ratios)``), each segment's toward the global one
(``delta_s = delta_global + w_n * (mean_s - delta_global)``). With residual noise sigma per
observation and a spread tau of true segment biases, the posterior mean under a normal prior has
exactly this form with ``k = sigma^2 / tau^2``; the default k = 10 corresponds to sigma ~ 0.25
(log-ratio scatter of single measured requests) against tau ~ 0.08 (spread of true biases
between segments). Worked: in a pool with no bias elsewhere, three points of ratio 2 move their
segment by w = 3/13 of ln 2 (x1.17), three hundred by 300/310 (x1.95); alone in the pool, by
ln 2 (1 - (10/13)^2) (x1.33) and ln 2 (1 - (10/310)^2) (x1.999).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
class Corrections:
    """The global correction and those of every segment that had observations."""

    shrinkage_k: float
    global_correction: SegmentCorrection
    segments: Mapping[tuple[str, str], SegmentCorrection]

    @classmethod
    def none(cls, shrinkage_k: float) -> Corrections:
        return cls(shrinkage_k, SegmentCorrection(*GLOBAL_SEGMENT, 0, 0.0, 0.0, 0.0), {})

    def correction_for(self, gpu: str, family: str) -> SegmentCorrection:
        """The segment's correction, or the global one when the segment had no observations."""
        return self.segments.get((gpu, family), self.global_correction)

    def factor_for(self, gpu: str, family: str) -> float:
        """Multiplier of the predicted GPU energy for a request on `gpu` of model `family`."""
        return self.correction_for(gpu, family).factor

    def to_payload(self) -> dict[str, Any]:
        return {
            "shrinkage_k": self.shrinkage_k,
            "global": self.global_correction.to_payload(),
            "segments": [s.to_payload() for s in self.segments.values()],
        }

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> Corrections:
        segments = [SegmentCorrection.from_payload(s) for s in data["segments"]]
        return cls(
            shrinkage_k=float(data["shrinkage_k"]),
            global_correction=SegmentCorrection.from_payload(data["global"]),
            segments={(s.gpu, s.family): s for s in segments},
        )


@dataclass(frozen=True, slots=True)
class ActiveCalibration:
    """A stored calibration as the estimator applies it: its id, the model version whose
    predictions it corrects (it applies to no other), and its corrections."""

    calibration_id: str
    model_version: str
    corrections: Corrections
