"""Which observations may be fitted: observations are untrusted input.

An observation is compared with the uncalibrated prediction of its quote as the log ratio
``ln(observed_gpu_j / predicted_gpu_j)``. Two screens, in order:

1. **Range check.** Both energies positive and finite, and the ratio within
   ``[1 / max_ratio, max_ratio]`` (default 1/20..20): a measurement twenty times off the quote
   is a unit mistake (kJ for J, one GPU for eight), a different request, or a hostile post, not
   a bias to correct.
2. **Robust outliers.** The modified z-score of Iglewicz and Hoaglin,
   ``z = 0.6745 (x - median) / MAD`` on the log ratios, flags ``|z| > outlier_z`` (3.5). It is
   computed within the observation's segment when that has at least `min_group` observations
   (segments may differ in bias legitimately), otherwise within the whole pool. The MAD is
   floored at `mad_floor` (0.05 in log) so that a tight group does not flag points that are
   merely tens of per cent away: with the floor no point within x1.3 of its group's median is
   flagged. The screen is for gross errors, not for drift, which the fit should follow.

Flagged observations are reported, never fitted and never scored.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from statistics import median

Z_SCALE = 0.6745  # Phi^-1(0.75): makes the MAD consistent with a normal sigma


class Flag(StrEnum):
    OUT_OF_RANGE = "out_of_range"
    OUTLIER = "outlier"


@dataclass(frozen=True, slots=True)
class Screened:
    """Per observation (same order as given): None if it may be fitted, else why not."""

    flags: list[Flag | None]

    def kept(self) -> list[int]:
        return [i for i, flag in enumerate(self.flags) if flag is None]

    def count(self, flag: Flag) -> int:
        return sum(1 for f in self.flags if f is flag)


def in_range(observed_gpu_j: float, predicted_gpu_j: float, max_ratio: float) -> bool:
    """Whether both energies [J] are positive and finite and within `max_ratio` of each other."""
    values = (observed_gpu_j, predicted_gpu_j)
    if not all(math.isfinite(v) and v > 0 for v in values):
        return False
    ratio = observed_gpu_j / predicted_gpu_j
    return 1.0 / max_ratio <= ratio <= max_ratio


def robust_z(values: Sequence[float], mad_floor: float) -> list[float]:
    """Modified z-scores of `values` (median/MAD based, MAD floored at `mad_floor`)."""
    if not values:
        return []
    centre = median(values)
    mad = max(median(abs(v - centre) for v in values), mad_floor)
    return [Z_SCALE * (v - centre) / mad for v in values]


def screen(
    observed_gpu_j: Sequence[float],
    predicted_gpu_j: Sequence[float],
    groups: Sequence[Hashable],
    *,
    max_ratio: float = 20.0,
    outlier_z: float = 3.5,
    min_group: int = 5,
    mad_floor: float = 0.05,
) -> Screened:
    """Range-check every observation, then flag robust outliers of the log ratio among those in
    range, within its group (segment) when the group has `min_group` points, else pooled."""
    flags: list[Flag | None] = [
        None if in_range(o, p, max_ratio) else Flag.OUT_OF_RANGE
        for o, p in zip(observed_gpu_j, predicted_gpu_j, strict=True)
    ]
    kept = [i for i, flag in enumerate(flags) if flag is None]
    logs = {i: math.log(observed_gpu_j[i] / predicted_gpu_j[i]) for i in kept}
    members: dict[Hashable, list[int]] = {}
    for i in kept:
        members.setdefault(groups[i], []).append(i)
    small = [i for group in members.values() if len(group) < min_group for i in group]
    pools = [group for group in members.values() if len(group) >= min_group]
    if small:
        pools.append(kept if len(kept) >= min_group else [])
    for pool in pools:
        scores = robust_z([logs[i] for i in pool], mad_floor)
        for i, z in zip(pool, scores, strict=True):
            # pooled scores only judge the small groups' points
            if abs(z) > outlier_z and (pool is not kept or i in small):
                flags[i] = Flag.OUTLIER
    return Screened(flags)
