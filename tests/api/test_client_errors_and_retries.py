"""The client package against the real app: catalogues and health read into its documents,
every error status raised as its own problem class, 429 and 503 retried after Retry-After within
the policy's bounds, and transport failures (no answer, refused connection) raised as such."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_support import (
    bring_database_back,
    create_key,
    example_body,
    quotes_client,
    running_client,
    take_database_away,
)
from fastapi.testclient import TestClient
from llm_energy_quotes_client import (
    NO_RETRIES,
    NotFound,
    PayloadTooLarge,
    QuotesClient,
    QuotesTimeout,
    QuotesTransportError,
    RateLimited,
    RetryPolicy,
    ServiceUnavailable,
)

ROOT = Path(__file__).resolve().parents[2]


def test_catalogues_and_health_are_read_into_documents(quotes: QuotesClient) -> None:
    gpus = quotes.gpus()
    assert len(gpus.items) == 24
    h100 = quotes.gpu("H100-SXM5-80GB")
    assert (h100.tdp_w, h100.memory_bytes) == (700.0, 8.0e10)
    assert h100.tensor_dense_flops_per_s["bf16"] == 9.894e14
    assert h100 in gpus.items
    models = quotes.models()
    catalogue = json.loads((ROOT / "service/catalog/data/models.json").read_text("utf-8"))
    assert len(models.items) == len(catalogue["models"])  # every entry, priced or not
    llama = quotes.model("meta-llama/Llama-3.1-8B-Instruct")  # the slash stays in the path
    assert llama.family == "llama" and llama.supported
    assert llama.architecture is not None and llama.architecture["num_layers"] == 32
    regions = {r.code: r for r in quotes.regions().items}
    assert regions["FR"].carbon_intensity_g_per_kwh == 56.0
    assert regions["PL"].carbon_intensity_g_per_kwh == 662.0
    health = quotes.health()
    assert (health.status, health.auth_mode, health.open_dev_mode) == ("ok", "open-dev", True)
    assert health.database.reachable and health.database.backend in ("sqlite", "postgresql")
    with pytest.raises(NotFound) as unknown:
        quotes.gpu("H100-SXM")
    assert unknown.value.extra["suggestions"][0] == "H100-SXM5-80GB"


def test_verbose_fills_the_breakdown(quotes: QuotesClient) -> None:
    plain = quotes.estimate(example_body())
    verbose = quotes.estimate(example_body(), verbose=True)
    assert plain.breakdown is None and verbose.breakdown is not None
    assert {row.phase for row in verbose.breakdown.kernels} == {"prefill", "decode"}
    assert verbose.energy.gpu_j == pytest.approx(plain.energy.gpu_j, rel=1e-12)
    rows_j = sum(row.gpu_j for row in verbose.breakdown.kernels)  # host and correction rows too
    assert rows_j == pytest.approx(verbose.energy.gpu_j, rel=1e-9)


def test_a_body_over_the_limit_is_payload_too_large(database_url: str) -> None:
    with running_client(database_url, max_body_bytes=4000) as small:
        with pytest.raises(PayloadTooLarge) as raised:
            quotes_client(small).estimate_batch([example_body()] * 40)
        assert raised.value.status == 413


@pytest.fixture(scope="module")
def limited(database_url: str) -> Iterator[tuple[TestClient, str]]:
    """An app allowing 2 estimates per key and 1 s window."""
    key = create_key(database_url, "rl-client", "estimate")
    with running_client(database_url, rate_limits={"estimate": 2}) as client:
        yield client, key


def test_429_is_raised_with_its_retry_after_when_retries_are_off(
    limited: tuple[TestClient, str],
) -> None:
    client, key = limited
    gateway = QuotesClient(api_key=key, http_client=client, retry=NO_RETRIES)
    time.sleep(1.0)  # a fresh window
    # The third estimate of a window is refused; on a slow machine three may straddle a window
    # boundary, so up to 20 are sent (the first refused one raises).
    with pytest.raises(RateLimited) as raised:
        for _ in range(20):
            gateway.estimate(example_body())
    assert raised.value.retry_after_s is not None and 0 <= raised.value.retry_after_s <= 1
    assert raised.value.headers["RateLimit-Policy"] == '"estimate";q=2;w=1'


def test_429_is_retried_after_retry_after(limited: tuple[TestClient, str]) -> None:
    client, key = limited
    gateway = QuotesClient(api_key=key, http_client=client, retry=RetryPolicy(max_retries=3))
    time.sleep(1.0)
    started = time.monotonic()
    ids = [gateway.estimate(example_body()).quote_id for _ in range(3)]
    assert len(set(ids)) == 3 and None not in ids
    assert time.monotonic() - started < 3.0  # waited out one window, not the whole policy
    # A wait past the policy's bound is raised at once instead of slept.
    impatient = QuotesClient(api_key=key, http_client=client, retry=RetryPolicy(max_wait_s=0.0))
    started = time.monotonic()
    with pytest.raises(RateLimited):
        for _ in range(20):  # as above: three may straddle a window boundary
            impatient.estimate(example_body())
    assert time.monotonic() - started < 0.9


def test_503_is_retried_until_the_database_is_back(database_url: str) -> None:
    key = create_key(database_url, "outage", "estimate,billing")
    with running_client(database_url, retry_after_s=1) as app_client:
        quote_id = quotes_client(app_client, key).estimate(example_body()).quote_id
        assert quote_id is not None
        take_database_away(app_client)
        with pytest.raises(ServiceUnavailable) as raised:
            QuotesClient(api_key=key, http_client=app_client, retry=NO_RETRIES).quote(quote_id)
        assert raised.value.retry_after_s == 1.0
        assert raised.value.type.endswith("database-unavailable")
        # Back while the client waits out Retry-After: its retry succeeds.
        timer = threading.Timer(0.3, bring_database_back, (app_client, database_url))
        timer.start()
        started = time.monotonic()
        patient = QuotesClient(api_key=key, http_client=app_client, retry=RetryPolicy())
        detail = patient.quote(quote_id)
        timer.join()
        assert detail.quote_id == quote_id
        assert 1.0 <= time.monotonic() - started < 5.0


def test_no_answer_is_a_timeout_and_a_closed_port_a_transport_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never answers
        port = silent.getsockname()[1]
        with QuotesClient(f"http://127.0.0.1:{port}", timeout_s=0.2) as client:
            started = time.monotonic()
            with pytest.raises(QuotesTimeout):
                client.health()
            assert time.monotonic() - started < 2.0
    with QuotesClient(f"http://127.0.0.1:{port}", timeout_s=0.2) as client:
        with pytest.raises(QuotesTransportError) as refused:
            client.health()
        assert not isinstance(refused.value, QuotesTimeout)
