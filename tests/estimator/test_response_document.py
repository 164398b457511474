"""The estimator writes each response document once, with orjson from plain values, its carbon
factors serialised once per context (service/pricing/document.py). The text must be exactly
what the response model writes for the same values: parsed by EstimateResponse and written
again by pydantic it comes back byte for byte (member order, float text, nulls, integers), for
single estimates and batch items, on every GPU and in every region, with caller overrides, a
verbose breakdown, a calibration, one output token, a custom architecture, and with the learned
regressor on and off."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from test_ascii_documents import CUSTOM_MOE

from service.catalog.engines import DEFAULT_ENGINE
from service.errors import ServiceError
from service.pricing.calibration import (
    PARAMETERS,
    ActiveCalibration,
    CalibrationPoint,
    GpuFit,
    HeldOutError,
    fit_corrections,
)
from service.pricing.document import in_schema_order
from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest
from service.schemas.estimate_response import EstimateResponse, LatencyOut
from service.schemas.validation import HeldOutErrorOut

T0 = datetime(2026, 11, 25, tzinfo=UTC)
WORKLOAD = {"batch_size": 3, "prompt_tokens": 300, "output_tokens": 40}


@pytest.fixture(scope="module", params=[False, True], ids=["roofline", "regressor"])
def estimator(request: pytest.FixtureRequest) -> Estimator:
    regressor = EnergyRegressor.load() if request.param else None
    return Estimator.from_catalogues(regressor=regressor)


def bodies(estimator: Estimator) -> list[dict[str, Any]]:
    """Requests over every GPU and region, overrides, edge workloads and a custom model."""
    found: list[dict[str, Any]] = [
        {"model": "google/gemma-2-2b", "hardware": {"gpu": gpu, "count": 1}}
        for gpu in estimator.gpus.ids
    ]
    found += [
        {
            "model": "mistralai/Mixtral-8x7B-Instruct-v0.1",
            "hardware": {"gpu": "H100-SXM5-80GB", "count": 2},
            "datacenter": {"region": record.code},
        }
        for record in estimator.regions.records
    ]
    found += [
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "hardware": {"gpu": "A100-SXM4-80GB", "count": 1},
            "datacenter": {
                "pue": 1.1,
                "carbon_intensity_g_per_kwh": 12.5,
                "wue_l_per_kwh": 0.0,
                "lifetime_years": 3,
                "utilisation": 0.35,
            },
            "workload": {"batch_size": 1, "prompt_tokens": 1, "output_tokens": 1},
        },
        {"architecture": CUSTOM_MOE, "hardware": {"gpu": "L40S", "count": 1}},
        {
            "model": "Qwen/Qwen3-30B-A3B",
            "hardware": {"gpu": "H100-SXM5-80GB", "count": 2, "parallelism": {"expert": 2}},
            "workload": {"batch_size": 64, "prompt_tokens": 8000, "output_tokens": 2},
        },
    ]
    return [{"workload": WORKLOAD, **body} for body in found]


def assert_written_as_pydantic_writes(priced: PricedRequest) -> None:
    text = priced.document.text()
    assert EstimateResponse.model_validate_json(text).model_dump_json() == text


def test_single_documents_are_what_the_response_model_writes(estimator: Estimator) -> None:
    for body in bodies(estimator):
        request = EstimateRequest.model_validate(body)
        try:
            priced = estimator.estimate(request)
        except ServiceError:  # a model that does not fit its GPU is a 422, no document
            continue
        assert_written_as_pydantic_writes(priced)


def test_verbose_and_calibrated_documents_too(estimator: Estimator) -> None:
    points = [CalibrationPoint(f"o{i}", "L40S", "custom", 100.0, 130.0, T0) for i in range(60)]
    # the L40S's refit, active and moving nothing, lets its custom segment's factor apply
    zero = (0.0,) * len(PARAMETERS)
    fit = GpuFit("L40S", DEFAULT_ENGINE, 60, 0, zero, HeldOutError(), True, "")
    corrections = replace(
        fit_corrections(points, shrinkage_k=10.0), fits={("L40S", DEFAULT_ENGINE): fit}
    )
    calibration = ActiveCalibration("c_1", estimator.model_version, corrections)
    for body in bodies(estimator)[-3:]:
        request = EstimateRequest.model_validate(body)
        for verbose in (False, True):
            priced = estimator.estimate(request, verbose=verbose, calibration=calibration)
            assert_written_as_pydantic_writes(priced)
            assert (priced.response.breakdown is not None) == verbose
            assert priced.response.calibration_id == "c_1"
    custom = estimator.estimate(EstimateRequest.model_validate(bodies(estimator)[-2]))
    calibrated = estimator.estimate(
        EstimateRequest.model_validate(bodies(estimator)[-2]), calibration=calibration
    )
    assert calibrated.response.energy.calibration_factor > 1.1  # the L40S custom segment
    assert calibrated.response.energy.gpu_j == pytest.approx(
        custom.response.energy.gpu_j * calibrated.response.energy.calibration_factor
    )


def test_documents_priced_together_too(estimator: Estimator) -> None:
    requests = [EstimateRequest.model_validate(body) for body in bodies(estimator)]
    results = estimator.price(requests)
    priced = [r for r in results if not isinstance(r, ServiceError)]
    assert len(priced) > len(requests) // 2
    for item in priced:
        assert_written_as_pydantic_writes(item)


def test_members_take_the_schemas_names_and_order() -> None:
    fields = tuple(HeldOutErrorOut.model_fields)
    values = {"upper_ratio": 1.3, "rows": 40, "level": "gpu", "lower_ratio": 0.8, "mape_pct": 9.0}
    assert list(in_schema_order(fields, values)) == [
        "level",
        "rows",
        "mape_pct",
        "lower_ratio",
        "upper_ratio",
    ]
    with pytest.raises(KeyError):  # a field without a value
        in_schema_order(fields, {**{k: v for k, v in values.items() if k != "rows"}, "x": 1})
    with pytest.raises(ValueError, match="rows_n"):  # a value the schema has no field for
        in_schema_order(fields, {**values, "rows_n": 40})


def test_every_latency_figure_has_its_bounds_in_the_schema() -> None:
    fields = tuple(LatencyOut.model_fields)
    for name in ("prefill_s", "decode_s", "time_per_output_token_s", "total_s"):
        at = fields.index(name)
        assert fields[at + 1 : at + 3] == (f"{name}_low", f"{name}_high")
