"""The one adapter between the web layer and the core: request in, priced response out."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from service.calibration import ActiveCalibration
from service.carbon_accounting import carbon_members
from service.catalog.coefficients import DEFAULT_ENGINE, load_engine_coefficients
from service.catalog.facilities import FacilityCatalog, load_facility_catalog
from service.catalog.gpus import GpuCatalog, load_gpu_catalog
from service.catalog.models import ModelCatalog, UnknownModel, load_model_catalog
from service.catalog.regions import RegionCatalog, load_region_catalog
from service.catalog.servers import ServerCatalog, load_server_catalog
from service.core.carbon import request_carbon
from service.core.coefficients import CostModelCoefficients
from service.core.errors import CostModelError
from service.core.estimate import estimate_request
from service.core.results import RequestEstimate
from service.core.uncertainty import Ranged
from service.core.workload import Workload
from service.db.quote_document import QuoteDocument
from service.estimate_parts import (
    Latency,
    carbon_priced_parts,
    invalid_request,
    kernel_row,
    roofline_energy,
    scaled_energy,
)
from service.regressor.runtime import EnergyPrediction, EnergyRegressor
from service.resolve import CUSTOM_MODEL_ID, ResolvedRequest, resolve_request
from service.schemas.estimate_request import EstimateRequest
from service.schemas.estimate_response import BreakdownOut, EstimateResponse

logger = logging.getLogger("service.estimator")

# Request contexts (model, hardware, data centre, serving: all but the workload) remembered per
# process. A gateway quotes the same few deployments over and over with new token counts; past
# this many contexts the memory is cleared and refilled (a bound, not an eviction policy).
MAX_CONTEXTS = 4096


@dataclass(frozen=True, slots=True)
class PricedRequest:
    """An estimate not yet stored: the response document (quote_id None), serialised once,
    and what to index it by."""

    document: QuoteDocument
    priced_at: datetime  # the document's created_at until its row is stamped at commit
    model_version: str
    calibration_id: str | None
    model_id: str
    gpu_id: str
    gpu_count: int

    @property
    def response(self) -> EstimateResponse:
        """The document parsed (for the rare paths and tests that want the fields)."""
        return EstimateResponse.model_validate_json(self.document.text())


def model_version(coefficients: CostModelCoefficients, regressor: EnergyRegressor | None) -> str:
    """Which estimator answers: the learned regressor over the roofline, or the roofline."""
    version = coefficients.version
    roofline = version if version.startswith("roofline") else f"roofline {version}"
    if regressor is None:
        return roofline
    learned = regressor.version
    if not learned.startswith("energy-gnn"):
        learned = f"energy-gnn {learned}"
    return f"{learned}+{roofline}"


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
        self._contexts: dict[str, ResolvedRequest] = {}

    @classmethod
    def from_catalogues(cls, regressor: EnergyRegressor | None = None) -> Estimator:
        """An estimator over the packaged catalogues, fitted coefficients and (if given) the
        learned energy regressor."""
        return cls(
            load_gpu_catalog(),
            load_model_catalog(),
            load_region_catalog(),
            load_engine_coefficients(),
            regressor=regressor,
        )

    def estimate(
        self,
        request: EstimateRequest,
        *,
        verbose: bool = False,
        calibration: ActiveCalibration | None = None,
    ) -> PricedRequest:
        """Price `request`; raises InvalidRequest (or UnknownName) naming the input at fault.

        `calibration` (the caller's current one) scales the GPU energy and its bounds by its
        factor for the request's GPU and model family, if it corrects this model version."""
        try:
            resolved = self.resolve(request)
            coefficients = self.engine_coefficients.get(resolved.engine, self.coefficients)
            result = estimate_request(
                resolved.architecture, resolved.workload, resolved.deployment, coefficients
            )
        except CostModelError as error:
            raise invalid_request(error, custom=request.architecture is not None) from None
        energy = self._energy(resolved, result, coefficients)
        return self.priced(
            resolved, Latency.of(result), energy, result if verbose else None, calibration
        )

    def resolve(self, request: EstimateRequest) -> ResolvedRequest:
        """`resolve_request`, answered from memory for a context seen before: resolution
        depends on everything but the workload (and the metadata, which it ignores), and the
        workload is taken from `request` every time. Raises what resolve_request raises."""
        key = request.model_dump_json(exclude={"workload", "metadata"}, exclude_unset=True)
        known = self._contexts.get(key)
        if known is None:
            known = resolve_request(
                request, self.gpus, self.models, self.regions, self.facilities, self.servers
            )
            if len(self._contexts) >= MAX_CONTEXTS:
                self._contexts.clear()
            self._contexts[key] = known
        workload = request.workload
        return replace(
            known,
            workload=Workload(workload.batch_size, workload.prompt_tokens, workload.output_tokens),
            notes=list(known.notes),
            defaulted=dict(known.defaulted),
        )

    def priced(
        self,
        resolved: ResolvedRequest,
        latency: Latency,
        energy: EnergyPrediction,
        breakdown: RequestEstimate | None,
        calibration: ActiveCalibration | None,
    ) -> PricedRequest:
        """The response for a priced request: calibration applied (if it corrects this model
        version), carbon from the energy, the kernel breakdown when `breakdown` is given."""
        if calibration is not None and calibration.model_version != self.model_version:
            calibration = None
        factor = 1.0
        if calibration is not None:
            factor = calibration.corrections.factor_for(resolved.gpu.id, self.family_of(resolved))
            energy = scaled_energy(energy, factor)
        calibration_id = calibration.calibration_id if calibration else None
        priced_at = datetime.now(UTC)
        document = self._document(
            resolved,
            latency,
            energy,
            breakdown,
            calibration_id=calibration_id,
            calibration_factor=factor,
            priced_at=priced_at,
        )
        return PricedRequest(
            document,
            priced_at,
            self.model_version,
            calibration_id,
            resolved.model_id,
            resolved.gpu.id,
            resolved.deployment.gpu_count,
        )

    def family_of(self, resolved: ResolvedRequest) -> str:
        """The model family a calibration segments by ("custom" for a custom architecture)."""
        return self.model_family(CUSTOM_MODEL_ID if resolved.is_custom else resolved.model_id)

    def model_family(self, model_id: str) -> str:
        """The catalogue family of `model_id`; "custom" when it is not in the catalogue."""
        try:
            return self.models.get(model_id).family
        except UnknownModel:
            return CUSTOM_MODEL_ID

    def _energy(
        self,
        resolved: ResolvedRequest,
        result: RequestEstimate,
        coefficients: CostModelCoefficients,
    ) -> EnergyPrediction:
        """GPU energy from the learned regressor when loaded, else from the roofline.

        A regressor that fails on a request (a bug, never an input error: inputs were priced by
        the roofline already) is logged and the roofline answers, saying so in the warnings.
        """
        if self.regressor is not None:
            try:
                features = self.regressor.features(
                    resolved.architecture,
                    resolved.workload,
                    resolved.deployment,
                    coefficients,
                    result,
                )
                return self.regressor.predict(features)
            except Exception:
                logger.exception("learned regressor failed; answering with the roofline energy")
                resolved.notes.append(
                    "the learned regressor failed on this request: energy is the analytical "
                    "roofline estimate"
                )
        return roofline_energy(result.prefill.gpu_j, result.decode.gpu_j, coefficients)

    def _document(
        self,
        resolved: ResolvedRequest,
        result: Latency,
        energy: EnergyPrediction,
        verbose_result: RequestEstimate | None,
        *,
        calibration_id: str | None,
        calibration_factor: float,
        priced_at: datetime,
    ) -> QuoteDocument:
        """The response document (EstimateResponse's members in its order, written once with
        orjson: the same text pydantic writes, tests/estimator/test_response_document.py), its
        carbon factors serialised once per context."""
        # Intervals bracket 1 in practice; clamp so a biased fit cannot invert the bounds.
        gpu_j = Ranged(
            energy.gpu_j,
            min(energy.gpu_j_low / energy.gpu_j, 1.0),
            max(energy.gpu_j_high / energy.gpu_j, 1.0),
        )
        inputs = resolved.carbon
        factor_set, rates = carbon_priced_parts(inputs)
        carbon = request_carbon(gpu_j, result.total_s, inputs.factors, rates)
        breakdown = None
        if verbose_result is not None:
            kernels = verbose_result.prefill.kernels + verbose_result.decode.kernels
            memory = verbose_result.memory
            breakdown = BreakdownOut(
                kernels=[kernel_row(kernel) for kernel in kernels],
                defaulted_inputs=resolved.defaulted,
                weight_bytes_per_gpu=memory.weight_bytes_per_gpu,
                kv_cache_bytes_per_gpu=memory.kv_cache_bytes_per_gpu,
                memory_capacity_bytes_per_gpu=memory.capacity_bytes_per_gpu,
            ).model_dump(mode="json")
        members: dict[str, Any] = {
            "model_version": self.model_version,
            "calibration_id": calibration_id,
            "model": resolved.model_id,
            "gpu": resolved.gpu.id,
            "gpu_count": result.gpu_count,
            "energy": {
                "gpu_j": energy.gpu_j,
                "gpu_j_low": energy.gpu_j_low,
                "gpu_j_high": energy.gpu_j_high,
                "per_sequence_gpu_j": energy.gpu_j / result.batch_size,
                "server_overhead_j": carbon.server_overhead_j.value,
                "facility_j": carbon.facility_j.value,
                "prefill_gpu_j": energy.prefill_gpu_j,
                "decode_gpu_j": energy.decode_gpu_j,
                "interval_lower_quantile": energy.lower_quantile,
                "interval_upper_quantile": energy.upper_quantile,
                "calibration_factor": calibration_factor,
            },
            "latency": {
                "prefill_s": result.prefill_s,
                "decode_s": result.decode_s,
                "time_per_output_token_s": result.time_per_output_token_s,
                "total_s": result.total_s,
            },
            "carbon": carbon_members(resolved.carbon, carbon),
            "breakdown": breakdown,
            "warnings": [*result.warnings, *resolved.notes],
        }
        text = orjson.dumps(members, option=orjson.OPT_SERIALIZE_NUMPY).decode()
        return QuoteDocument.written(text, priced_at, factor_set)
