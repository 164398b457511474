"""The one pricing function: resolved requests in, response documents out.

`Estimator.price` prices a list of requests (a single request is a list of one): each is
resolved against the catalogues; all of them, whatever their contexts (model, deployment,
engine), go through the cost model in one array evaluation (service.core.estimate.
estimate_contexts), the feature encoder and the learned regressor; then each is calibrated and
written as its quote document. A request that fails (unknown name, invalid input,
does not fit) comes back as its error, the others are priced as if alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from service.catalog.engines import COEFFICIENTS_PATH, DEFAULT_ENGINE, load_engine_coefficients
from service.catalog.facilities import FacilityCatalog, load_facility_catalog
from service.catalog.gpus import GpuCatalog, GpuRecord, load_gpu_catalog
from service.catalog.intervals import EvidenceIntervals, load_intervals
from service.catalog.models import ModelCatalog, UnknownModel, load_model_catalog
from service.catalog.regions import RegionCatalog, load_region_catalog
from service.catalog.registered import RegisteredArchitecture
from service.catalog.servers import ServerCatalog, load_server_catalog
from service.core.coefficients import CostModelCoefficients
from service.core.cost_model_errors import CostModelError
from service.core.estimate import estimate_contexts, pricing_context
from service.core.estimates import WorkloadEstimates
from service.core.pass_plans import PricingContext
from service.core.results import RequestEstimate
from service.core.workload import Workload
from service.errors import ServiceError
from service.pricing.calibration import ActiveCalibration, Factors, PhysicalTerms, physical_terms
from service.pricing.continuous_energy import with_static_corrections
from service.pricing.disaggregated import split_energies, split_latency, with_split_serving
from service.pricing.document import Calibrated, Latency, quote_document
from service.pricing.energy import learned_decode_factor, roofline_energy, scaled_energy
from service.pricing.evidence import Case, Evidence, case_evidence
from service.pricing.priced import PricedRequest, model_version
from service.pricing.refusals import invalid_request
from service.pricing.regressor.features import workload_features
from service.pricing.regressor.runtime import EnergyPrediction, EnergyRegressor
from service.pricing.resolve import CUSTOM_MODEL_ID, ResolvedRequest, resolve_request
from service.schemas.estimate_request import EstimateRequest

logger = logging.getLogger("service.estimator")

# Request contexts (model, hardware, data centre, serving: all but the workload) remembered per
# process. A gateway quotes the same few deployments over and over with new token counts; past
# this many contexts the memory is cleared and refilled (a bound, not an eviction policy).
MAX_CONTEXTS = 4096
# What `resolve` takes from each request rather than from the remembered context.
_PER_REQUEST: dict[str, Any] = {
    "workload": True,
    "metadata": True,
    "serving": {"concurrent_sequences"},
}
REGRESSOR_FAILED_NOTE = (
    "the learned regressor failed on this request: energy is the analytical roofline estimate"
)


@dataclass(slots=True)
class _Group:
    """Requests priced in one context: their positions in the list and resolved inputs."""

    context: PricingContext
    positions: list[int] = field(default_factory=list)
    resolved: list[ResolvedRequest] = field(default_factory=list)
    known: list[_Known] = field(default_factory=list)


def _with_workload(
    known: ResolvedRequest, workload: Workload, defaulted: dict[str, Any]
) -> ResolvedRequest:
    """`known` with a request's own workload and defaults, its notes copied (the request's
    pricing adds notes of its own to them)."""
    return replace(known, workload=workload, notes=list(known.notes), defaulted=defaulted)


@dataclass(slots=True)
class _Known:
    """A remembered request context: its resolution, and the pricing context it is priced in
    (or why it cannot be), found when a request of it is first priced."""

    resolved: ResolvedRequest
    priced_in: PricingContext | CostModelError | None = None
    # its evidence (Estimator.evidence_of), by whether the request joins a running server
    evidence: dict[bool, Evidence] = field(default_factory=dict)

    def evidence_of(self, resolved: ResolvedRequest, estimator: Estimator) -> Evidence:
        """`estimator.evidence_of(resolved)`, for a request of this context: it depends on
        the context and whether the request joins a running server, so it is found once."""
        serving = resolved.workload.concurrent_sequences is not None
        known = self.evidence.get(serving)
        if known is None:
            known = self.evidence[serving] = estimator.evidence_of(resolved)
        return known


class Estimator:
    """Prices requests: latency from the analytical roofline model, GPU energy from the learned
    regressor when one is loaded (else from the roofline), carbon from the energy."""

    def __init__(
        self,
        gpus: GpuCatalog,
        models: ModelCatalog,
        regions: RegionCatalog,
        coefficients: CostModelCoefficients | dict[str, CostModelCoefficients],
        facilities: FacilityCatalog | None = None,
        servers: ServerCatalog | None = None,
        regressor: EnergyRegressor | None = None,
        intervals: EvidenceIntervals | None = None,
    ) -> None:
        self.gpus = gpus
        self.models = models
        self.regions = regions
        self.facilities = facilities or load_facility_catalog()
        self.servers = servers or load_server_catalog()
        if not isinstance(coefficients, dict):
            coefficients = {DEFAULT_ENGINE: coefficients}
        self.engine_coefficients = coefficients
        self.coefficients = coefficients[DEFAULT_ENGINE]
        self.regressor = regressor
        self.model_version = model_version(self.coefficients, regressor)
        self._contexts: dict[str, _Known] = {}
        self.intervals = intervals or load_intervals()
        # by case and whether the quote joins a running server: a few hundred at most
        self._evidence: dict[tuple[Case, bool], Evidence] = {}

    @classmethod
    def from_catalogues(
        cls, regressor: EnergyRegressor | None = None, coefficients_path: Path | None = None
    ) -> Estimator:
        """An estimator over the packaged catalogues, fitted coefficients (those of
        `coefficients_path` if given) and (if given) the learned energy regressor."""
        return cls(
            load_gpu_catalog(),
            load_model_catalog(),
            load_region_catalog(),
            load_engine_coefficients(coefficients_path or COEFFICIENTS_PATH),
            regressor=regressor,
        )

    def learn_gpus(self, records: Sequence[GpuRecord]) -> None:
        """Price `records` (GPUs registered with POST /v1/gpus, read from the database) like
        catalogue GPUs from now on: they are never replaced or removed, so they are kept."""
        self.gpus = self.gpus.with_records(records)

    def estimate(
        self,
        request: EstimateRequest,
        *,
        verbose: bool = False,
        calibration: ActiveCalibration | None = None,
    ) -> PricedRequest:
        """`price` of one request; raises its InvalidRequest (or UnknownName)."""
        (result,) = self.price([request], verbose=verbose, calibration=calibration)
        if isinstance(result, ServiceError):
            raise result
        return result

    def price(
        self,
        requests: Sequence[EstimateRequest],
        *,
        verbose: bool = False,
        calibration: ActiveCalibration | None = None,
        registered: Sequence[RegisteredArchitecture | None] | None = None,
    ) -> list[PricedRequest | ServiceError]:
        """Each request's quote document, or its error, in order (see the module doc).

        `calibration` (the caller's current one) scales the GPU energy and its bounds by its
        factor for the request's GPU and model family, if it corrects this model version.
        `registered[i]`, when given, is the tenant's registered model request i names."""
        results: list[PricedRequest | ServiceError | None] = [None] * len(requests)
        groups = self._groups(requests, results, registered or [None] * len(requests))
        if not groups:  # every request failed to resolve
            return [_done(result) for result in results]
        # Every request of every context in one array evaluation; row `number` of the pass is
        # request rows[number] (its index in `requests`) resolved as resolved[number].
        rows = [i for group in groups for i in group.positions]
        resolved = [r for group in groups for r in group.resolved]
        contexts = [k for group in groups for k in group.known]
        estimates, errors = estimate_contexts(
            [(group.context, [r.workload for r in group.resolved]) for group in groups]
        )
        estimates, split_errors = with_split_serving(
            estimates, [resolved[number] for number in estimates.positions]
        )
        errors.update(split_errors)
        for number, error in errors.items():
            index = rows[number]
            results[index] = invalid_request(error, custom=requests[index].architecture is not None)
        priced_rows = [resolved[number] for number in estimates.positions]
        energies = self._energies(estimates, priced_rows)
        learned = self.regressor is not None
        energies = split_energies(estimates, energies, priced_rows, learned=learned)
        if calibration is not None and calibration.model_version != self.model_version:
            calibration = None
        priced_at = datetime.now(UTC)
        # Read as lists once: indexing an array per row costs more than the row's arithmetic.
        phase_s = estimates.phase_s.T.tolist()
        decode_steps = estimates.decode_steps.tolist()  # all waves' decode passes
        moved = self._calibration_factors(calibration, estimates, priced_rows)
        for j, number in enumerate(estimates.positions):
            index = rows[number]
            if results[index] is not None:  # priced, then found not to fit in memory
                continue
            request = priced_rows[j]
            factors, refit = None, moved[j]
            prefill_factor, decode_factor = 1.0, 1.0
            if calibration is not None and refit is not None:
                gpu, family = request.gpu.id, self.family_of(request)
                factors = calibration.corrections.with_family(refit, gpu, family)
                prefill_factor, decode_factor = factors.prefill, factors.decode
            elif self.regressor is not None:  # its time head, where trained; a refit's times
                # were fitted to the analytical ones (T(0)), so they replace it, never stack
                engines = self.regressor.time_head_engines
                decode_factor = learned_decode_factor(energies[j], request, engines)
            prefill_s, decode_s = phase_s[j]
            latency = Latency(
                *_scaled_times(prefill_s, decode_s, decode_steps[j], prefill_factor, decode_factor),
                estimates.gpu_count(j),  # a disaggregated row holds both workers' GPUs
                request.workload.batch_size,
                estimates.warnings_of(j),
            )
            latency = split_latency(estimates, j, latency)
            breakdown = estimates.item(j) if verbose else None
            evidence = contexts[number].evidence_of(request, self)
            if factors is not None and calibration is not None:  # its fit's own intervals
                evidence = calibration.evidence(evidence, request.gpu.id, request.engine)
            results[index] = self._priced(
                request, latency, energies[j], breakdown, calibration, factors, priced_at, evidence
            )
        return [_done(result) for result in results]

    def resolve(
        self, request: EstimateRequest, registered: RegisteredArchitecture | None = None
    ) -> ResolvedRequest:
        """`resolve_request`, answered from memory for a context seen before: resolution
        depends on everything but the workload, the running sequences and the metadata (which
        it ignores), and those are taken from `request` every time. A registered model's
        context is keyed by the model read too (its tenant may register it anew). Raises what
        resolve_request raises."""
        return self._resolve(request, registered)[1]

    def _resolve(
        self, request: EstimateRequest, registered: RegisteredArchitecture | None
    ) -> tuple[_Known, ResolvedRequest]:
        """`resolve`, with the remembered context it came from."""
        key = request.model_dump_json(exclude=_PER_REQUEST, exclude_unset=True)
        if registered is not None:
            key += repr(registered)
        remembered = self._contexts.get(key)
        if remembered is None:
            remembered = _Known(
                resolve_request(
                    request,
                    self.gpus,
                    self.models,
                    self.regions,
                    self.facilities,
                    self.servers,
                    registered,
                )
            )
            if len(self._contexts) >= MAX_CONTEXTS:
                self._contexts.clear()
            self._contexts[key] = remembered
        known = remembered.resolved
        workload, serving = request.workload, request.serving
        running = serving.concurrent_sequences if serving else None
        defaulted = dict(known.defaulted)
        if "cached_prompt_tokens" not in workload.model_fields_set:
            defaulted["workload.cached_prompt_tokens"] = 0
        if running is None:  # null: a static batch of the request's own sequences alone
            defaulted["serving.concurrent_sequences"] = None
        return remembered, _with_workload(
            known,
            Workload(
                workload.batch_size,
                workload.prompt_tokens,
                workload.output_tokens,
                workload.cached_prompt_tokens,
                running,
                known.workload.decode_only,
            ),
            defaulted,
        )

    def family_of(self, resolved: ResolvedRequest) -> str:
        """The model family a calibration segments by ("custom" for a custom architecture)."""
        return self.model_family(CUSTOM_MODEL_ID if resolved.is_custom else resolved.model_id)

    def model_family(self, model_id: str) -> str:
        """The catalogue family of `model_id`, or of the catalogued model it is a variant of
        (a quantised or instruct repo id, as `resolve` prices it); "custom" when neither."""
        try:
            return self.models.find(model_id)[0].family
        except UnknownModel:
            return CUSTOM_MODEL_ID

    def evidence_of(self, resolved: ResolvedRequest) -> Evidence:
        """The evidence level behind `resolved`'s case, its intervals and validation (a
        request joining a running server bounds its prefill by time to first token under load)."""
        case = Case(
            gpu=resolved.gpu.id,
            vendor=str(resolved.gpu.raw.get("vendor", "")),
            engine=resolved.engine_evidence,
            precision=resolved.deployment.precision.weights.value,
            family=self.family_of(resolved),
            profile="" if resolved.engine_evidence == resolved.engine else resolved.engine,
        )
        serving = resolved.workload.concurrent_sequences is not None
        known = self._evidence.get((case, serving))
        if known is None:
            known = case_evidence(case, self.intervals, serving)
            self._evidence[(case, serving)] = known
        return known

    def _groups(
        self,
        requests: Sequence[EstimateRequest],
        results: list[PricedRequest | ServiceError | None],
        registered: Sequence[RegisteredArchitecture | None],
    ) -> list[_Group]:
        """The requests that resolve and can be priced, grouped by the context they are priced
        in; the others' errors in `results` (a model or layout that cannot be priced refuses
        every request of its context)."""
        groups: dict[PricingContext, _Group] = {}  # by identity: contexts are cached
        for index, request in enumerate(requests):
            try:
                known, resolved = self._resolve(request, registered[index])
            except CostModelError as error:
                results[index] = invalid_request(error, custom=request.architecture is not None)
                continue
            except ServiceError as error:
                results[index] = error
                continue
            context = known.priced_in
            if context is None:
                context = known.priced_in = self._pricing_context(resolved)
            if isinstance(context, CostModelError):
                results[index] = invalid_request(context, custom=request.architecture is not None)
                continue
            group = groups.get(context)
            if group is None:
                group = groups[context] = _Group(context)
            group.positions.append(index)
            group.resolved.append(resolved)
            group.known.append(known)
        return list(groups.values())

    def _pricing_context(self, resolved: ResolvedRequest) -> PricingContext | CostModelError:
        """The context `resolved` is priced in, or the error of a model or layout that cannot
        be priced (whatever the workload)."""
        coefficients = self.engine_coefficients.get(resolved.engine, self.coefficients)
        try:
            return pricing_context(resolved.architecture, resolved.deployment, coefficients)
        except CostModelError as error:
            return error

    def _energies(
        self, estimates: WorkloadEstimates, resolved: list[ResolvedRequest]
    ) -> list[EnergyPrediction]:
        """Each priced row's GPU energy: the regressor's (one pass for all; a continuous
        batch's corrected as its static reading is, see service.pricing.continuous_energy)
        or, without one or if it fails, the roofline's."""
        if self.regressor is not None and resolved:
            regressor = self.regressor
            try:
                predictions = regressor.predict(workload_features(estimates))
                return with_static_corrections(
                    estimates,
                    [r.workload for r in resolved],
                    predictions,
                    lambda readings: regressor.predict(workload_features(readings)),
                )
            except Exception:  # a bug, never an input error: the roofline priced these inputs
                logger.exception("learned regressor failed; answering with the roofline energy")
                for request in resolved:
                    request.notes.append(REGRESSOR_FAILED_NOTE)
        contexts = estimates.plans.contexts
        return [
            roofline_energy(prefill_j, decode_j, contexts[c].coefficients)
            for c, (prefill_j, decode_j) in zip(
                estimates.plans.context.tolist(), estimates.phase_gpu_j.T.tolist(), strict=True
            )
        ]

    def _calibration_factors(
        self,
        calibration: ActiveCalibration | None,
        estimates: WorkloadEstimates,
        resolved: list[ResolvedRequest],
    ) -> list[Factors | None]:
        """How `calibration`'s refits move each priced row: None where no active fit covers
        its GPU and engine (the physical terms are read only when one does)."""
        moved: list[Factors | None] = [None] * len(resolved)
        if calibration is None:
            return moved
        by_fit: dict[tuple[str, str], list[int]] = {}
        for j, request in enumerate(resolved):
            by_fit.setdefault((request.gpu.id, request.engine), []).append(j)
        terms: list[PhysicalTerms] = []

        def read(rows: list[int]) -> PhysicalTerms:
            if not terms:
                terms.append(physical_terms(estimates))
            return terms[0].take(rows)

        for (gpu, engine), rows in by_fit.items():
            factors = calibration.corrections.physical_factors(gpu, engine, partial(read, rows))
            if factors is not None:
                for j, factor in zip(rows, factors, strict=True):
                    moved[j] = factor
        return moved

    def _priced(
        self,
        resolved: ResolvedRequest,
        latency: Latency,
        energy: EnergyPrediction,
        breakdown: RequestEstimate | None,
        calibration: ActiveCalibration | None,
        factors: Factors | None,
        priced_at: datetime,
        evidence: Evidence,
    ) -> PricedRequest:
        """The priced request: calibration applied, its document written with `evidence`
        (evidence_of(resolved))."""
        factor = 1.0 if factors is None else factors.energy
        if factors is not None:
            energy = scaled_energy(energy, factor)
        calibration_id = calibration.calibration_id if calibration else None
        document, total_g = quote_document(
            self.model_version,
            resolved,
            latency,
            energy,
            breakdown,
            Calibrated(calibration_id, factor),
            priced_at,
            evidence,
        )
        return PricedRequest(
            document,
            priced_at,
            self.model_version,
            calibration_id,
            resolved.model_id,
            resolved.gpu.id,
            resolved.deployment.gpu_count,
            energy.gpu_j,
            total_g,
        )


def _scaled_times(
    prefill_s: float, decode_s: float, decode_steps: float, prefill: float, decode: float
) -> tuple[float, float, float, float]:
    """Prefill time times `prefill`, decode time and time per output token (over
    `decode_steps`, all waves' decode passes) times `decode`, and the total their sum [s]: the
    analytical times moved by a calibration's refit or the regressor's time head (1.0: not)."""
    tpot_s = decode_s / decode_steps if decode_steps else 0.0
    prefill_s, decode_s = prefill_s * prefill, decode_s * decode
    return prefill_s, decode_s, tpot_s * decode, prefill_s + decode_s


def _done(result: PricedRequest | ServiceError | None) -> PricedRequest | ServiceError:
    assert result is not None  # every request is priced or failed above
    return result
