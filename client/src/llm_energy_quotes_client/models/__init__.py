"""The service's response documents, declared here (the client never imports the service)."""

from llm_energy_quotes_client.models.base import Document
from llm_energy_quotes_client.models.calibrations import (
    Calibration,
    CalibrationList,
    Flagged,
    GpuFit,
    ObservationCounts,
    Rollback,
    Segment,
)
from llm_energy_quotes_client.models.catalog import (
    Gpu,
    GpuList,
    Model,
    ModelList,
    Region,
    RegionList,
)
from llm_energy_quotes_client.models.estimate import (
    Breakdown,
    Carbon,
    CarbonFactor,
    Energy,
    Estimate,
    KernelRow,
    Latency,
)
from llm_energy_quotes_client.models.health import DatabaseHealth, Health
from llm_energy_quotes_client.models.quotes import (
    CsvPage,
    Observation,
    QuoteDetail,
    QuotePage,
    QuoteSummary,
)

__all__ = [
    "Breakdown",
    "Calibration",
    "CalibrationList",
    "Carbon",
    "CarbonFactor",
    "CsvPage",
    "DatabaseHealth",
    "Document",
    "Energy",
    "Estimate",
    "Flagged",
    "Gpu",
    "GpuFit",
    "GpuList",
    "Health",
    "KernelRow",
    "Latency",
    "Model",
    "ModelList",
    "Observation",
    "ObservationCounts",
    "QuoteDetail",
    "QuotePage",
    "QuoteSummary",
    "Region",
    "RegionList",
    "Rollback",
    "Segment",
]
