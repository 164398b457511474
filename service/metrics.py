"""Prometheus metrics of one app, on their own registry (so several apps can coexist in tests)."""

from __future__ import annotations

from typing import Any

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
        # Each request looks up its labelled children here, not through `labels()`, which
        # validates and locks on every call, a cost paid by every estimate. The
        # label sets are bounded: route templates x methods x status codes, catalogue models
        # x GPUs.
        self._request_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._estimate_children: dict[tuple[str, str], Any] = {}

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one HTTP request and its latency [s]."""
        key = (route, method, str(status))
        children = self._request_children.get(key)
        if children is None:
            labels = dict(zip(("route", "method", "status"), key, strict=True))
            children = self.requests.labels(**labels), self.latency.labels(**labels)
            self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def count_estimates(self, model: str, gpu: str, count: int = 1) -> None:
        """Count `count` priced requests of `model` on `gpu`."""
        child = self._estimate_children.get((model, gpu))
        if child is None:
            child = self._estimate_children[(model, gpu)] = self.estimates.labels(model, gpu)
        child.inc(count)
