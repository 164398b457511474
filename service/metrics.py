"""Prometheus metrics of one app, on their own registry (so several apps can coexist in tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

# No `*_created` series: they double the exposition and Prometheus derives resets itself.
disable_created_metrics()  # type: ignore[no-untyped-call]  # (untyped in prometheus-client)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "quotes_http_requests_total",
            "HTTP requests by route template, method and status code.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "quotes_http_request_duration_seconds",
            "HTTP request latency by route template and status code [s].",
            ["route", "method", "status"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=self.registry,
        )
        self.estimates = Counter(
            "quotes_estimates_total",
            "Requests priced, by model and GPU.",
            ["model", "gpu"],
            registry=self.registry,
        )
        self.db_errors = Counter(
            "quotes_db_errors_total",
            "Database operations that failed, by operation.",
            ["operation"],
            registry=self.registry,
        )
