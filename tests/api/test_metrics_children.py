"""The request and estimate metrics count through their cached labelled children exactly as
through `labels()`."""

from __future__ import annotations

from service.metrics import Metrics


def test_requests_are_counted_and_timed_per_label_set() -> None:
    metrics = Metrics()
    metrics.observe_request("/v1/estimate", "POST", 200, 0.002)
    metrics.observe_request("/v1/estimate", "POST", 200, 0.004)
    metrics.observe_request("/v1/estimate", "POST", 429, 0.0005)
    value = metrics.registry.get_sample_value
    ok = {"route": "/v1/estimate", "method": "POST", "status": "200"}
    assert value("quotes_http_requests_total", ok) == 2.0
    assert value("quotes_http_request_duration_seconds_count", ok) == 2.0
    assert value("quotes_http_request_duration_seconds_sum", ok) == 0.006
    assert value("quotes_http_request_duration_seconds_bucket", {**ok, "le": "0.0025"}) == 1.0
    refused = {**ok, "status": "429"}
    assert value("quotes_http_requests_total", refused) == 1.0


def test_estimates_are_counted_per_model_and_gpu() -> None:
    metrics = Metrics()
    metrics.count_estimates("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB", 3)
    metrics.count_estimates("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB")
    metrics.count_estimates("custom", "L4")
    value = metrics.registry.get_sample_value
    llama = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM5-80GB"}
    assert value("quotes_estimates_total", llama) == 4.0
    assert value("quotes_estimates_total", {"model": "custom", "gpu": "L4"}) == 1.0
