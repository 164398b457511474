"""Prometheus metrics of one app, on their own registry (so several apps can coexist in tests).

With several worker processes, set `PROMETHEUS_MULTIPROC_DIR` (an empty directory, on tmpfs, made
before the workers start): prometheus-client then keeps every process's values in files there,
and `exposition()` adds them up across the workers, so a scrape that reaches any worker sees the
whole instance's counts rather than that one worker's.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)

# No `*_created` series: they double the exposition and Prometheus derives resets itself.
disable_created_metrics()  # type: ignore[no-untyped-call]  # (untyped in prometheus-client)

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
_STAGE_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
QUOTE_LABELS = ("tenant", "model", "gpu")


def multiprocess_dir() -> str | None:
    """The directory prometheus-client shares values through, when multiprocess mode is on."""
    return os.environ.get(MULTIPROCESS_DIR_VARIABLE) or None


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
            "Requests priced, by tenant, model and GPU.",
            QUOTE_LABELS,
            registry=self.registry,
        )
        self.quoted_gpu_j = Counter(
            "quotes_quoted_gpu_joules_total",
            "GPU energy quoted, by tenant, model and GPU [J].",
            QUOTE_LABELS,
            registry=self.registry,
        )
        self.quoted_co2e_g = Counter(
            "quotes_quoted_co2e_grams_total",
            "CO2e quoted (operational and embodied), by tenant, model and GPU [g].",
            QUOTE_LABELS,
            registry=self.registry,
        )
        self.refused = Counter(
            "quotes_refused_total",
            "Requests refused instead of priced, by tenant and problem type (`validation`, "
            "`unknown-name`, ...).",
            ["tenant", "reason"],
            registry=self.registry,
        )
        self.by_calibration = Counter(
            "quotes_estimates_by_calibration_total",
            "Requests priced, by tenant and the calibration in force (`none`: uncalibrated).",
            ["tenant", "calibration"],
            registry=self.registry,
        )
        self.stored = Counter(
            "quotes_stored_total",
            "Priced quotes by what became of them: stored, spooled (to be replayed into the "
            "database) or not_stored (answered without a quote id).",
            ["tenant", "outcome"],
            registry=self.registry,
        )
        self.pricing_s = Histogram(
            "quotes_pricing_duration_seconds",
            "Time to price one call's requests, waiting for the pricing thread included [s].",
            buckets=_STAGE_BUCKETS_S,
            registry=self.registry,
        )
        self.storing_s = Histogram(
            "quotes_storing_duration_seconds",
            "Time to store one call's quotes (commit or spool) [s].",
            buckets=_STAGE_BUCKETS_S,
            registry=self.registry,
        )
        self.db_errors = Counter(
            "quotes_db_errors_total",
            "Database operations that failed, by operation.",
            ["operation"],
            registry=self.registry,
        )
        # Each request looks up its labelled children here, not through `labels()`, which
        # validates and locks on every call, a cost paid by every estimate. The label sets
        # are bounded: route templates x methods x status codes; tenants x catalogue models
        # x GPUs; tenants x outcomes, problem types and calibrations.
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        # The children one request or one priced group touches together, found with one look-up.
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self._quote_children: dict[tuple[str, str, str], tuple[Any, ...]] = {}

    def _child(self, metric: Counter | Histogram, *labels: str) -> Any:
        """`metric`'s child for `labels` (in the metric's label order), made once."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one HTTP request and its latency [s]."""
        key = (route, method, status)
        children = self._request_children.get(key)
        if children is None:
            labels = (route, method, str(status))
            children = self._request_children[key] = (
                self._child(self.requests, *labels),
                self._child(self.latency, *labels),
            )
        children[0].inc()
        children[1].observe(seconds)

    def count_quotes(
        self, tenant: str, model: str, gpu: str, count: int, gpu_j: float, co2e_g: float
    ) -> None:
        """Count `count` requests of `tenant` priced for `model` on `gpu`, quoting `gpu_j` [J]
        and `co2e_g` [g] in all."""
        key = (tenant, model, gpu)
        children = self._quote_children.get(key)
        if children is None:
            children = self._quote_children[key] = tuple(
                self._child(metric, *key)
                for metric in (self.estimates, self.quoted_gpu_j, self.quoted_co2e_g)
            )
        estimates, quoted_gpu_j, quoted_co2e_g = children
        estimates.inc(count)
        quoted_gpu_j.inc(gpu_j)
        quoted_co2e_g.inc(co2e_g)

    def count_calibrated(self, tenant: str, calibration_id: str | None, count: int) -> None:
        """Count `count` requests of `tenant` priced under `calibration_id` (None: none)."""
        self._child(self.by_calibration, tenant, calibration_id or "none").inc(count)

    def count_refused(self, tenant: str, reason: str) -> None:
        """Count one request of `tenant` refused with problem type `reason`."""
        self._child(self.refused, tenant, reason).inc()

    def count_stored(self, tenant: str, outcome: str, count: int) -> None:
        """Count `count` quotes of `tenant` that were `stored`, `spooled` or `not_stored`."""
        self._child(self.stored, tenant, outcome).inc(count)

    def exposition(self) -> bytes:
        """The Prometheus text of this process, or of every worker in multiprocess mode."""
        directory = multiprocess_dir()
        if directory is None:
            return generate_latest(self.registry)
        combined = CollectorRegistry()
        multiprocess.MultiProcessCollector(combined, path=directory)  # type: ignore[no-untyped-call]
        return generate_latest(combined)
