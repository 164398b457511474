"""docker-compose's Prometheus scrapes the service's /metrics, and every query of the committed
Grafana dashboard asks for series the service exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from service.metrics import Metrics

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
# PromQL words that are not series names.
PROMQL_WORDS = {"sum", "by", "rate", "histogram_quantile", "le", "tenant", "outcome", "route",
                "reason", "operation", "calibration"}  # fmt: skip


def exported_series() -> set[str]:
    """Every series name the service's registry can expose (histograms with their parts)."""
    names = set()
    for family in Metrics().registry.collect():
        names.add(family.name)
        names |= {family.name + suffix for suffix in ("_total", "_bucket", "_sum", "_count")}
    return names


def test_every_dashboard_query_names_an_exported_series() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "quotes.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(exprs) >= 7
    exported = exported_series()
    for expr in exprs:
        without_labels = re.sub(r"\{[^}]*\}", "", expr)
        words = set(re.findall(r"[a-z_][a-z0-9_]+", without_labels)) - PROMQL_WORDS
        series = {word for word in words if word.startswith("quotes_")}
        assert series and series <= exported, (expr, series - exported)
    titles = " ".join(panel["title"] for panel in dashboard["panels"]).lower()
    for topic in ("quotes per second", "p99", "energy", "co2e", "calibration"):
        assert topic in titles


def test_compose_wires_prometheus_to_the_service_and_grafana_to_prometheus() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    prometheus_config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = prometheus_config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["service:8000"]
    assert compose["prometheus"]["depends_on"] == ["service"]
    mounted = " ".join(compose["prometheus"]["volumes"] + compose["grafana"]["volumes"])
    assert "./deploy/prometheus/prometheus.yml" in mounted
    assert "./deploy/grafana/dashboards" in mounted and "./deploy/grafana/provisioning" in mounted
    datasource = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090" and datasource["uid"] == "prometheus"
