"""A priced request as the quote service takes it, and the name of the estimator that priced it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from service.core.coefficients import CostModelCoefficients
from service.db.quote_document import QuoteDocument
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_response import EstimateResponse


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
    gpu_j: float  # the quote's GPU energy [J] and CO2e [g], for the metrics
    total_g: float

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
