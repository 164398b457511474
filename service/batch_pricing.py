"""Pricing a batch of requests together: what `Estimator.estimate` answers for each, in order.

Requests that resolve to the same model, deployment and engine coefficients share one array
evaluation of the cost model (core `estimate_requests`) and of the regressor's features, when
there are at least MIN_VECTOR_GROUP of them; fewer are priced one by one, as `Estimator.estimate`
prices them. Every request of the batch then goes through the regressor together (onnxruntime
runs them in slices of INFERENCE_SLICE). A request that fails (unknown name, invalid input, does
not fit) comes back as its error, the others are priced as if alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from service.calibration import ActiveCalibration
from service.core.architecture import ModelArchitecture
from service.core.coefficients import CostModelCoefficients
from service.core.errors import CostModelError
from service.core.estimate import estimate_request, estimate_requests
from service.core.estimate_many import BatchEstimate
from service.core.results import RequestEstimate
from service.core.workload import Deployment
from service.errors import ServiceError
from service.estimate_parts import Latency, invalid_request, roofline_energy
from service.estimator import Estimator, PricedRequest
from service.regressor.batch_features import BatchFeatures, batch_features
from service.regressor.runtime import EnergyPrediction
from service.resolve import ResolvedRequest
from service.schemas.estimate_request import EstimateRequest

logger = logging.getLogger("service.estimator")
# The array form's fixed cost is that of a few hundred numpy calls. Cost model and features
# per request, one by one against the array form (bench/results/batch.md, "Small groups"):
# 154 / 368 µs for one request, 150 / 195 for two, 148 / 131 for three, 149 / 102 for four.
MIN_VECTOR_GROUP = 3
REGRESSOR_FAILED_NOTE = (
    "the learned regressor failed on this request: energy is the analytical roofline estimate"
)


@dataclass(frozen=True, slots=True)
class _Group:
    """Requests priced together: their indices in the batch, resolved inputs and estimates."""

    indices: list[int]
    resolved: list[ResolvedRequest]
    coefficients: CostModelCoefficients
    estimates: BatchEstimate
    errors: dict[int, CostModelError]


@dataclass(frozen=True, slots=True)
class _Single:
    """A request of a group too small for the array evaluation, priced alone."""

    index: int
    resolved: ResolvedRequest
    coefficients: CostModelCoefficients
    estimate: RequestEstimate


def price_batch(
    estimator: Estimator,
    requests: Sequence[EstimateRequest],
    *,
    verbose: bool,
    calibration: ActiveCalibration | None,
    array_groups: bool = True,
) -> list[PricedRequest | ServiceError]:
    """`estimator.estimate` of each request (its error if it fails), in the same order.

    `array_groups=False` prices every request with the one-request functions (one onnxruntime
    pass all the same), so that each answer is exactly the one it would get alone; the array
    form agrees to float32 rounding of the regressor's inputs (~1e-6)."""
    results: list[PricedRequest | ServiceError | None] = [None] * len(requests)
    members: dict[
        tuple[ModelArchitecture, Deployment, str], tuple[list[int], list[ResolvedRequest]]
    ] = {}
    for index, request in enumerate(requests):
        try:
            resolved = estimator.resolve(request)
        except CostModelError as error:
            results[index] = invalid_request(error, custom=request.architecture is not None)
            continue
        except ServiceError as error:
            results[index] = error
            continue
        key = (resolved.architecture, resolved.deployment, resolved.engine)
        indices, resolved_list = members.setdefault(key, ([], []))
        indices.append(index)
        resolved_list.append(resolved)
    groups: list[_Group] = []
    singles: list[_Single] = []
    for (arch, deployment, engine), (indices, resolved_list) in members.items():
        coefficients = estimator.engine_coefficients.get(engine, estimator.coefficients)
        if not array_groups or len(indices) < MIN_VECTOR_GROUP:
            for index, resolved in zip(indices, resolved_list, strict=True):
                try:
                    estimate = estimate_request(arch, resolved.workload, deployment, coefficients)
                except CostModelError as error:
                    custom = requests[index].architecture is not None
                    results[index] = invalid_request(error, custom=custom)
                    continue
                singles.append(_Single(index, resolved, coefficients, estimate))
            continue
        try:
            estimates, errors = estimate_requests(
                arch, [r.workload for r in resolved_list], deployment, coefficients
            )
        except CostModelError:  # the model or layout fails for every request: each says why
            for index in indices:
                results[index] = _alone(estimator, requests[index], verbose, calibration)
            continue
        for position, failure in errors.items():
            custom = requests[indices[position]].architecture is not None
            results[indices[position]] = invalid_request(failure, custom=custom)
        groups.append(_Group(indices, resolved_list, coefficients, estimates, errors))
    energies = _energies(estimator, groups, singles)
    for group, energy in zip(groups, energies[: len(groups)], strict=True):
        estimates = group.estimates
        phase_s = estimates.phase_s.T.tolist()
        for j, position in enumerate(estimates.positions):
            if position in group.errors:  # priced, then found not to fit in memory
                continue
            resolved = group.resolved[position]
            workload = resolved.workload
            steps = workload.output_tokens - 1
            prefill_s, decode_s = phase_s[j]
            latency = Latency(
                prefill_s,
                decode_s,
                decode_s / steps if steps else 0.0,
                prefill_s + decode_s,
                estimates.gpu_count,
                workload.batch_size,
                estimates.warnings,
            )
            results[group.indices[position]] = estimator.priced(
                resolved,
                latency,
                energy[j],
                estimates.item(j) if verbose else None,
                calibration,
            )
    for single, energy in zip(singles, energies[len(groups) :], strict=True):
        results[single.index] = estimator.priced(
            single.resolved,
            Latency.of(single.estimate),
            energy[0],
            single.estimate if verbose else None,
            calibration,
        )
    return [_done(result) for result in results]


def _done(result: PricedRequest | ServiceError | None) -> PricedRequest | ServiceError:
    assert result is not None  # every request is priced or failed above
    return result


def _alone(
    estimator: Estimator,
    request: EstimateRequest,
    verbose: bool,
    calibration: ActiveCalibration | None,
) -> PricedRequest | ServiceError:
    try:
        return estimator.estimate(request, verbose=verbose, calibration=calibration)
    except ServiceError as error:
        return error


def _energies(
    estimator: Estimator, groups: list[_Group], singles: list[_Single]
) -> list[list[EnergyPrediction]]:
    """Each group's priced requests' GPU energies, then each single's (a list of one): the
    regressor's (one pass for the whole batch) or, without one or if it fails, the
    roofline's."""
    regressor = estimator.regressor
    if regressor is not None and (groups or singles):
        try:
            features: list[BatchFeatures] = [
                batch_features(
                    group.resolved[0].architecture, group.resolved[0].deployment, group.estimates
                )
                for group in groups
            ]
            for single in singles:
                resolved = single.resolved
                one = regressor.features(
                    resolved.architecture,
                    resolved.workload,
                    resolved.deployment,
                    single.coefficients,
                    single.estimate,
                )
                features.append(BatchFeatures.of_one(one))
            return regressor.predict_batches(features)
        except Exception:
            logger.exception("learned regressor failed; answering with the roofline energy")
            for group in groups:
                for resolved in group.resolved:
                    resolved.notes.append(REGRESSOR_FAILED_NOTE)
            for single in singles:
                single.resolved.notes.append(REGRESSOR_FAILED_NOTE)
    return [
        [
            roofline_energy(prefill_j, decode_j, group.coefficients)
            for prefill_j, decode_j in group.estimates.phase_gpu_j.T.tolist()
        ]
        for group in groups
    ] + [
        [
            roofline_energy(
                single.estimate.prefill.gpu_j, single.estimate.decode.gpu_j, single.coefficients
            )
        ]
        for single in singles
    ]
