"""The estimate hot path (service/api/fast_estimate.py) answers exactly what the FastAPI route
answers, and passes every case it does not take on to the route.

Two apps over one database, identical but for `fast_estimate_path`; the fast one's quote writer
counts the groups it stored (in the loop or by its thread), which tells which path answered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from api_support import bearer, create_key, example_body, running_client, services_of
from fastapi.testclient import TestClient

from service.api import fast_estimate

# Fields that differ between any two quotes of the same request.
PER_QUOTE = ("quote_id", "created_at")


@pytest.fixture(scope="module")
def key(database_url: str) -> str:
    return create_key(database_url, "fast-tenant", "estimate,billing")


@pytest.fixture(scope="module")
def fast(database_url: str, key: str) -> Iterator[TestClient]:
    with running_client(database_url, fast_estimate_path=True) as client:
        yield client


@pytest.fixture(scope="module")
def routed(database_url: str, key: str) -> Iterator[TestClient]:
    with running_client(database_url, fast_estimate_path=False) as client:
        yield client


def transactions(client: TestClient) -> int:
    writer = services_of(client).quotes.writer
    assert writer is not None
    return writer.groups


def without_ids(answer: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in answer.items() if name not in PER_QUOTE}


BODIES = [
    example_body(),
    example_body(datacenter={"region": "FR", "pue": 1.2}),
    example_body(
        model="mistralai/Mixtral-8x7B-Instruct-v0.1",
        hardware={"gpu": "A100-SXM4-80GB", "count": 4},
        workload={"batch_size": 3, "prompt_tokens": 1000, "output_tokens": 17},
    ),
    {
        "architecture": {
            "hidden_size": 2048,
            "num_layers": 16,
            "num_attention_heads": 16,
            "intermediate_size": 8192,
            "vocab_size": 32000,
        },
        "workload": {"batch_size": 2, "prompt_tokens": 64, "output_tokens": 8},
        "hardware": {"gpu": "L4"},
    },
]


@pytest.mark.parametrize("body", BODIES, ids=["llama", "region", "moe", "custom"])
def test_the_fast_path_answers_what_the_route_answers(
    fast: TestClient, routed: TestClient, key: str, body: dict[str, Any]
) -> None:
    before = transactions(fast)
    quick = fast.post("/v1/estimate", json=body, headers=bearer(key))
    slow = routed.post("/v1/estimate", json=body, headers=bearer(key))
    assert transactions(fast) == before + 1  # answered by the fast path, stored by the writer
    assert quick.status_code == slow.status_code == 200, (quick.text, slow.text)
    assert quick.headers["content-type"] == slow.headers["content-type"] == "application/json"
    # Both apps count against their own limiter: one request each, the same window.
    assert quick.headers["ratelimit-policy"] == slow.headers["ratelimit-policy"]
    assert quick.headers["ratelimit"] == slow.headers["ratelimit"]
    assert without_ids(quick.json()) == without_ids(slow.json())
    stored = fast.get(f"/v1/quotes/{quick.json()['quote_id']}", headers=bearer(key))
    assert stored.status_code == 200
    assert stored.json()["response"] == quick.json()  # what was stored is what was answered


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (example_body(model="no-such/model"), 422),  # unknown name: priced, then refused
        (example_body(hardware={"gpu": "L4", "count": 1}, model="Qwen/Qwen2.5-72B-Instruct"), 422),
    ],
    ids=["unknown-model", "does-not-fit"],
)
def test_pricing_errors_are_the_routes_problems(
    fast: TestClient, routed: TestClient, key: str, body: dict[str, Any], status: int
) -> None:
    quick = fast.post("/v1/estimate", json=body, headers=bearer(key))
    slow = routed.post("/v1/estimate", json=body, headers=bearer(key))
    assert quick.status_code == slow.status_code == status
    assert quick.headers["content-type"] == "application/problem+json"
    assert quick.json() == slow.json()


@pytest.mark.parametrize(
    "case",
    ["invalid-body", "string-for-int", "not-json", "text-plain", "verbose", "idempotency-key"],
)
def test_what_the_fast_path_does_not_take_is_answered_by_the_route(
    fast: TestClient, routed: TestClient, key: str, case: str
) -> None:
    body = example_body()
    headers = bearer(key)
    params: dict[str, str] = {}
    content: bytes | None = None
    if case == "invalid-body":
        body["workload"]["batch_size"] = 0
    elif case == "string-for-int":
        body["workload"]["batch_size"] = "12"
    elif case == "not-json":
        content = b'{"model": '
    elif case == "text-plain":
        content = b"{}"
        headers = {**headers, "content-type": "text/plain"}
    elif case == "verbose":
        params = {"verbose": "true"}
    elif case == "idempotency-key":
        headers = {**headers, "Idempotency-Key": "fast-path-test-1"}

    def send(client: TestClient, key_suffix: str) -> Any:
        these = dict(headers)
        if "Idempotency-Key" in these:
            these["Idempotency-Key"] += key_suffix
        if content is not None:
            return client.post("/v1/estimate", content=content, headers=these, params=params)
        return client.post("/v1/estimate", json=body, headers=these, params=params)

    before = transactions(fast)
    quick, slow = send(fast, "-fast"), send(routed, "-routed")
    assert transactions(fast) == before  # not the writer: the route stored it (or nothing)
    assert quick.status_code == slow.status_code
    if quick.status_code == 200:
        assert without_ids(quick.json()) == without_ids(slow.json())
        if case == "verbose":
            assert quick.json()["breakdown"]["kernels"]
    else:
        assert quick.status_code == 422
        assert quick.json() == slow.json()


def test_callers_the_fast_path_cannot_admit_get_the_routes_401_and_403(
    fast: TestClient, database_url: str
) -> None:
    billing_only = create_key(database_url, "fast-tenant", "billing")
    assert fast.post("/v1/estimate", json=example_body()).status_code == 401  # keys exist now
    wrong = fast.post("/v1/estimate", json=example_body(), headers=bearer("lq_nonsense"))
    assert wrong.status_code == 401
    scoped = fast.post("/v1/estimate", json=example_body(), headers=bearer(billing_only))
    assert scoped.status_code == 403
    assert scoped.json()["type"].endswith("/forbidden")


def test_each_estimate_is_counted_once_against_the_rate_limit(database_url: str) -> None:
    limited_key = create_key(database_url, "limited-fast", "estimate")
    with running_client(database_url, rate_limits={"estimate": 3}, rate_limit_window_s=60) as c:
        answers = [
            c.post("/v1/estimate", json=example_body(), headers=bearer(limited_key))
            for _ in range(4)
        ]
        assert transactions(c) == 3
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [a.headers["ratelimit"].split(";")[1] for a in answers] == ["r=2", "r=1", "r=0", "r=0"]
    assert answers[3].headers["retry-after"]
    assert answers[3].json()["type"].endswith("/rate-limited")


def test_fast_answers_are_labelled_with_the_route_in_the_metrics(
    fast: TestClient, key: str
) -> None:
    fast.post("/v1/estimate", json=example_body(), headers=bearer(key))
    text = fast.get("/metrics").text
    line = 'quotes_http_requests_total{method="POST",route="/v1/estimate",status="200"}'
    assert line in text
    assert 'route="unmatched"' not in text


def test_a_request_alone_in_its_worker_is_committed_at_once(
    fast: TestClient, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load-shedding gate counts this request as the only one in progress, so the writer
    is told there is no one to group with (QuoteWriter.save's `commit_now`)."""
    writer = services_of(fast).quotes.writer
    assert writer is not None
    asked: list[bool] = []
    save = writer.save

    async def recording_save(quotes: Any, *, commit_now: bool = False) -> Any:
        asked.append(commit_now)
        return await save(quotes, commit_now=commit_now)

    monkeypatch.setattr(writer, "save", recording_save)
    assert fast.post("/v1/estimate", json=example_body(), headers=bearer(key)).status_code == 200
    assert asked == [True]


async def asgi_post(app: Any, body: dict[str, Any], key: str) -> tuple[int, bytes]:
    """POST /v1/estimate straight into the ASGI app, in the caller's event loop."""
    raw = json.dumps(body).encode()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/estimate",
        "raw_path": b"/v1/estimate",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {key}".encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
        "app": app,
    }
    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_requests_arriving_together_are_priced_together_as_if_alone(
    database_url: str, routed: TestClient, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five requests started in one loop iteration (one unknown model among them), in a worker
    counted busy from the first request in progress on, reach the pricing queue together: one
    `_price_together` call; each answers what the route answers for it alone, and every priced
    one is stored. (The key cache is on, as in production, so that no request waits on a key
    lookup in the thread pool.)"""
    monkeypatch.setattr(fast_estimate, "PRICE_TOGETHER_FROM", 1)
    with running_client(database_url, fast_estimate_path=True, api_key_cache_s=60.0) as fast:
        assert (
            fast.post("/v1/estimate", json=example_body(), headers=bearer(key)).status_code == 200
        )
        quotes = services_of(fast).quotes
        together: list[int] = []
        price_together = quotes._price_together

        def recording(requests: Any, tenant: str) -> Any:
            together.append(len(requests))
            return price_together(requests, tenant)

        monkeypatch.setattr(quotes.pricing, "_price_together", recording)
        bodies = [*BODIES, example_body(model="no-such/model")]

        async def all_at_once() -> list[tuple[int, bytes]]:
            return await asyncio.gather(*(asgi_post(fast.app, body, key) for body in bodies))

        assert fast.portal is not None
        answers = fast.portal.call(all_at_once)
        assert together == [len(bodies)]
        for body, (status, content) in zip(bodies, answers, strict=True):
            alone = routed.post("/v1/estimate", json=body, headers=bearer(key))
            assert status == alone.status_code
            answer = json.loads(content)
            if status != 200:
                assert answer == alone.json()
                continue
            assert without_ids(answer) == without_ids(alone.json())
            stored = fast.get(f"/v1/quotes/{answer['quote_id']}", headers=bearer(key))
            assert stored.json()["response"] == answer
        assert [status for status, _ in answers] == [200, 200, 200, 200, 422]


def test_a_worker_that_keeps_up_prices_each_request_at_once(
    fast: TestClient, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below PRICE_TOGETHER_FROM requests in progress nothing waits in the pricing queue."""
    assert fast_estimate.PRICE_TOGETHER_FROM == 16
    quotes = services_of(fast).quotes
    together: list[int] = []
    monkeypatch.setattr(quotes.pricing, "_price_together", lambda r, t: together.append(len(r)))
    for body in BODIES:
        assert fast.post("/v1/estimate", json=body, headers=bearer(key)).status_code == 200
    assert together == []
