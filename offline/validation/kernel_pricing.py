"""Price measured kernels with the cost model: its counts, its roofline, its power model.

A table row becomes one or more kernel executions (a fused MoE is three: gate+up GEMM,
activation, down GEMM), each a `service.core` `Work` with the tensor-core precision it runs at
and whether it streams memory. Their time is the roofline's (`service.core.roofline`: the
slowest unit at the fitted achievable rates, plus the launch cost) and their power the power
model's (`kernel_gpu_j` over that time). Nothing here is fitted: the coefficients are the
service's, read from ``service/catalog/data/cost_model_coefficients.json``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from offline.validation.kernel_tables import KernelTable
from service.core.architecture import ModelArchitecture, validate_architecture
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError
from service.core.hardware import GpuSpec
from service.core.roofline import COMPUTE_UNITS, UnitRates, kernel_gpu_j, unit_rates, unit_times_s
from service.core.shards import ShardShapes, shard_shapes
from service.core.work import Work
from service.core.workload import Deployment, Parallelism, Precision

FloatArray = npt.NDArray[np.float64]
MS_PER_S = 1000.0


@dataclass(frozen=True, slots=True)
class KernelCall:
    """One kernel execution: its counts, the tensor-core peak it runs at, and whether it
    streams memory (`service.core.roofline.STREAMING_KINDS`)."""

    work: Work
    compute_key: str
    streaming: bool


@dataclass(frozen=True, slots=True)
class PricingContext:
    """The GPU and coefficients rows are priced with."""

    gpu: GpuSpec
    coefficients: CostModelCoefficients

    @property
    def launch_s(self) -> float:
        return self.coefficients.roofline.kernel_launch_s

    @property
    def tile_m(self) -> int:
        return self.coefficients.roofline.gemm_tile_m

    def rates(self, compute_key: str) -> UnitRates:
        return _rates(self.gpu, compute_key, self.coefficients)

    def price(self, calls: list[KernelCall], launch_s: float) -> tuple[float, float]:
        """(time [s], mean power [W]) of `calls` run one after another on one GPU."""
        time_s = energy_j = 0.0
        power = self.coefficients.power
        for call in calls:
            rates = self.rates(call.compute_key)
            units = unit_times_s(call.work, rates, streaming=call.streaming)
            kernel_s = max(units) + launch_s
            link_s = call.work.network_bytes / rates.network_bytes_per_s
            compute_s = max(units[:COMPUTE_UNITS])
            energy_j += kernel_gpu_j(self.gpu, power, kernel_s, compute_s, units[3], link_s)
            time_s += kernel_s
        return time_s, energy_j / time_s


@lru_cache(maxsize=64)
def _rates(gpu: GpuSpec, compute_key: str, coefficients: CostModelCoefficients) -> UnitRates:
    return unit_rates(gpu, compute_key, coefficients.roofline)


@lru_cache(maxsize=4096)
def shapes_of(
    arch: ModelArchitecture,
    gpu: GpuSpec,
    precision: Precision,
    tensor: int = 1,
    expert: int = 1,
) -> ShardShapes:
    """The cost model's per-GPU shapes of `arch` on `tensor` x `expert` GPUs (its typed errors
    for an architecture or layout it refuses)."""
    validate_architecture(arch)
    return shard_shapes(arch, Deployment(gpu, Parallelism(tensor, expert), precision))


RowCalls = tuple[str, list[KernelCall], float]
"""What a row maps to: its op type label, its kernel executions, the launch cost per kernel [s]."""

RowMapper = Callable[[KernelTable, int, PricingContext], RowCalls | str]
"""Maps row i of a table onto kernel executions, or names why the cost model does not price
it (the row is then counted under that reason)."""


@dataclass
class PricedRows:
    """The priced rows of one table, and the rows left out by reason."""

    op: list[str] = field(default_factory=list)
    measured_s: list[float] = field(default_factory=list)
    predicted_s: list[float] = field(default_factory=list)
    measured_w: list[float] = field(default_factory=list)
    predicted_w: list[float] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    def arrays(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """(measured_s, predicted_s, measured_w, predicted_w) as arrays."""
        return (
            np.array(self.measured_s, dtype=np.float64),
            np.array(self.predicted_s, dtype=np.float64),
            np.array(self.measured_w, dtype=np.float64),
            np.array(self.predicted_w, dtype=np.float64),
        )


def price_table(table: KernelTable, mapper: RowMapper, context: PricingContext) -> PricedRows:
    """Every row of `table` priced by `mapper`; rows it cannot price are counted by reason."""
    out = PricedRows()
    latency_ms = table.column("latency")
    power_w = table.column("power")
    for i in range(table.rows):
        measured = latency_ms[i]
        if measured is None or not measured > 0.0:
            out.skipped["no positive latency"] += 1
            continue
        try:
            mapped = mapper(table, i, context)
            if isinstance(mapped, str):
                out.skipped[mapped] += 1
                continue
            label, calls, launch_s = mapped
            predicted_s, predicted_w = context.price(calls, launch_s)
        except CostModelError as error:  # a precision or layout the cost model refuses
            out.skipped[type(error).__name__] += 1
            continue
        out.op.append(label)
        out.measured_s.append(measured / MS_PER_S)
        out.predicted_s.append(predicted_s)
        out.measured_w.append(float(power_w[i]) if power_w[i] is not None else float("nan"))
        out.predicted_w.append(predicted_w)
    return out
