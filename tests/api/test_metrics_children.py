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


def test_quotes_are_counted_with_their_energy_and_co2e_per_tenant_model_and_gpu() -> None:
    metrics = Metrics()
    llama = ("acme", "meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB")
    metrics.count_quotes(*llama, 3, 3000.0, 0.75)
    metrics.count_quotes(*llama, 1, 250.0, 0.0625)
    metrics.count_quotes("other", "custom", "L4", 1, 40.0, 0.01)
    value = metrics.registry.get_sample_value
    labels = dict(zip(("tenant", "model", "gpu"), llama, strict=True))
    assert value("quotes_estimates_total", labels) == 4.0
    assert value("quotes_quoted_gpu_joules_total", labels) == 3250.0
    assert value("quotes_quoted_co2e_grams_total", labels) == 0.8125
    other = {"tenant": "other", "model": "custom", "gpu": "L4"}
    assert value("quotes_estimates_total", other) == 1.0
    assert value("quotes_quoted_gpu_joules_total", other) == 40.0
