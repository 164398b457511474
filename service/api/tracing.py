"""Optional OpenTelemetry tracing of every HTTP request (`pip install 'llm-energy-quotes[otel]'`).

Off by default. With `QUOTES_OTEL_ENABLED=true` each request becomes a server span exported over
OTLP/HTTP to where the standard `OTEL_EXPORTER_OTLP_ENDPOINT` points (default localhost:4318);
probes and /metrics are left out. The packages are an extra, not a dependency: a service that
does not trace does not carry them, and one told to trace without them refuses to start.
"""

from __future__ import annotations

from fastapi import FastAPI

from service.config import Settings

# Scraped and probed every few seconds: spans of them would drown the requests' own.
UNTRACED_URLS = "/metrics,/v1/health/live,/v1/health/ready"


def install_tracing(app: FastAPI, settings: Settings, span_processor: object = None) -> bool:
    """Trace `app` when `settings.otel_enabled` (True if it does); `span_processor` replaces
    the OTLP exporter's (tests give an in-memory one)."""
    if not settings.otel_enabled:
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as error:
        raise RuntimeError(
            "QUOTES_OTEL_ENABLED=true needs the tracing packages: "
            "pip install 'llm-energy-quotes[otel]'"
        ) from error
    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.otel_service_name})
    )
    if span_processor is None:
        span_processor = BatchSpanProcessor(OTLPSpanExporter())
    assert isinstance(span_processor, SpanProcessor)
    provider.add_span_processor(span_processor)
    FastAPIInstrumentor.instrument_app(app, tracer_provider=provider, excluded_urls=UNTRACED_URLS)
    return True
