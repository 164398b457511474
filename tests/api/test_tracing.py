"""With QUOTES_OTEL_ENABLED, every request but the probes and /metrics is a server span."""

from __future__ import annotations

from api_support import example_body, make_settings
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from service.api.tracing import install_tracing
from service.main import create_app


def test_requests_become_spans_and_probes_do_not(database_url: str) -> None:
    settings = make_settings(database_url)  # tracing off: no spans, the app traced below
    app = create_app(settings)
    exporter = InMemorySpanExporter()
    traced = settings.model_copy(update={"otel_enabled": True})
    assert install_tracing(app, traced, SimpleSpanProcessor(exporter))
    with TestClient(app) as client:
        assert client.post("/v1/estimate", json=example_body()).status_code == 200
        client.get("/v1/health/live")
        client.get("/metrics")
    servers = [span for span in exporter.get_finished_spans() if span.kind.name == "SERVER"]
    assert [span.name for span in servers] == ["POST /v1/estimate"]
    attributes = servers[0].attributes or {}
    status = attributes.get("http.response.status_code", attributes.get("http.status_code"))
    assert status == 200
    assert servers[0].resource.attributes["service.name"] == "llm-energy-quotes"


def test_tracing_is_off_by_default(database_url: str) -> None:
    app = create_app(make_settings(database_url))
    assert not install_tracing(app, make_settings(database_url))
