"""Concurrent requests (open dev mode, tenant `dev`): idempotent retries racing in one process
and across processes (two apps over one database), and the billing pull while quotes are being
inserted by another process. Row counts are read from the database itself."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from api_support import count_quotes, example_body, running_client, services_of
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import create_engine, delete, func, select

from service.db.base import utc_now
from service.db.ids import new_quote_id
from service.db.tables import IdempotencyClaim, Quote

TENANT = "dev"


@pytest.fixture(scope="module")
def second_client(database_url: str) -> Iterator[TestClient]:
    """Another app over the same database: another worker process, for what matters here
    (its own in-process guard, its own connection pool)."""
    with running_client(database_url) as test_client:
        yield test_client


def price_slowly(monkeypatch: pytest.MonkeyPatch, client: TestClient, delay_s: float) -> None:
    """Make pricing take `delay_s` so that requests overlap."""
    estimator = services_of(client).estimator
    original = estimator.price

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(delay_s)
        return original(*args, **kwargs)

    monkeypatch.setattr(estimator, "price", slow)


def post_at_once(clients: list[TestClient], key: str, body: dict[str, Any]) -> list[Response]:
    """POST the same body under the same Idempotency-Key from one thread per client, released
    together by a barrier."""
    barrier = threading.Barrier(len(clients))

    def post(client: TestClient) -> Response:
        barrier.wait()
        return client.post("/v1/estimate", json=body, headers={"Idempotency-Key": key})

    with ThreadPoolExecutor(len(clients)) as pool:
        return list(pool.map(post, clients))


def claims(database_url: str) -> int:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            statement = select(func.count()).select_from(IdempotencyClaim)
            return int(connection.execute(statement).scalar_one())
    finally:
        engine.dispose()


def assert_one_quote_for_all(responses: list[Response]) -> str:
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 409}, [r.text for r in responses]
    assert 200 in statuses
    quote_ids = {r.json()["quote_id"] for r in responses if r.status_code == 200}
    assert len(quote_ids) == 1 and None not in quote_ids, quote_ids
    for conflict in (r for r in responses if r.status_code == 409):
        assert conflict.headers["content-type"].startswith("application/problem+json")
        assert int(conflict.headers["Retry-After"]) > 0
    return quote_ids.pop()


def test_concurrent_retries_in_one_process_store_one_quote(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    price_slowly(monkeypatch, client, 0.3)
    responses = post_at_once([client] * 8, "race-1", example_body())
    quote_id = assert_one_quote_for_all(responses)
    assert [r.status_code for r in responses].count(409) >= 1  # they overlapped
    assert count_quotes(database_url, tenant=TENANT, idempotency_key="race-1") == 1
    again = client.post("/v1/estimate", json=example_body(), headers={"Idempotency-Key": "race-1"})
    assert again.status_code == 200 and again.json()["quote_id"] == quote_id
    assert claims(database_url) == 0


def test_concurrent_retries_across_processes_store_one_quote(
    client: TestClient,
    second_client: TestClient,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    price_slowly(monkeypatch, client, 0.3)
    price_slowly(monkeypatch, second_client, 0.3)
    responses = post_at_once([client, second_client] * 4, "race-2", example_body())
    quote_id = assert_one_quote_for_all(responses)
    assert count_quotes(database_url, tenant=TENANT, idempotency_key="race-2") == 1
    for each in (client, second_client):
        again = each.post(
            "/v1/estimate", json=example_body(), headers={"Idempotency-Key": "race-2"}
        )
        assert again.json()["quote_id"] == quote_id
    assert claims(database_url) == 0


def test_a_key_in_flight_in_another_process_is_409(
    client: TestClient,
    second_client: TestClient,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()
    estimator = services_of(client).estimator
    original = estimator.price

    def blocked(*args: Any, **kwargs: Any) -> Any:
        release.wait(10)
        return original(*args, **kwargs)

    monkeypatch.setattr(estimator, "price", blocked)
    headers = {"Idempotency-Key": "in-flight"}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.post, "/v1/estimate", json=example_body(), headers=headers)
        deadline = time.monotonic() + 5
        while claims(database_url) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        conflict = second_client.post("/v1/estimate", json=example_body(), headers=headers)
        release.set()
        stored = first.result(timeout=10)
    assert conflict.status_code == 409, conflict.text
    assert conflict.json()["type"].endswith("/conflict")
    assert "Retry-After" in conflict.headers
    assert stored.status_code == 200
    after = second_client.post("/v1/estimate", json=example_body(), headers=headers)
    assert after.json()["quote_id"] == stored.json()["quote_id"]
    assert count_quotes(database_url, tenant=TENANT, idempotency_key="in-flight") == 1


def drop_claims(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(delete(IdempotencyClaim))
    finally:
        engine.dispose()


def add_claim(database_url: str, key: str, claimed_at: datetime) -> None:
    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(delete(IdempotencyClaim))
            connection.execute(
                IdempotencyClaim.__table__.insert().values(
                    tenant=TENANT,
                    idempotency_key=key,
                    holder="a-dead-process",
                    claimed_at=claimed_at,
                )
            )
    finally:
        engine.dispose()


def test_a_claim_left_by_a_dead_process_expires(client: TestClient, database_url: str) -> None:
    lease_s = services_of(client).settings.idempotency_lease_s
    add_claim(database_url, "orphan", utc_now())
    headers = {"Idempotency-Key": "orphan"}
    assert client.post("/v1/estimate", json=example_body(), headers=headers).status_code == 409
    add_claim(database_url, "orphan", utc_now() - timedelta(seconds=lease_s + 1))
    taken = client.post("/v1/estimate", json=example_body(), headers=headers)
    assert taken.status_code == 200 and taken.json()["quote_id"]
    assert claims(database_url) == 0


def test_each_key_counts_one_estimate_however_often_it_comes(
    client: TestClient, database_url: str
) -> None:
    """A replayed key, a key reused with another body (422) and a key another process holds
    (409) are answered without a new quote: the estimate metrics count the key's one quote."""
    labels = {"tenant": TENANT, "model": example_body()["model"], "gpu": "H100-SXM5-80GB"}

    def estimates() -> float:
        found = services_of(client).metrics.registry.get_sample_value(
            "quotes_estimates_total", labels
        )
        return found or 0.0

    before = estimates()
    headers = {"Idempotency-Key": "counted-once"}
    first = client.post("/v1/estimate", json=example_body(), headers=headers)
    assert first.status_code == 200
    assert estimates() == before + 1
    replayed = client.post("/v1/estimate", json=example_body(), headers=headers)
    assert replayed.json()["quote_id"] == first.json()["quote_id"]
    other_body = example_body(workload={"batch_size": 1, "prompt_tokens": 10, "output_tokens": 9})
    assert client.post("/v1/estimate", json=other_body, headers=headers).status_code == 422
    add_claim(database_url, "held-elsewhere", utc_now())
    held = {"Idempotency-Key": "held-elsewhere"}
    assert client.post("/v1/estimate", json=example_body(), headers=held).status_code == 409
    assert estimates() == before + 1
    assert claims(database_url) == 1  # the other process's, untouched
    drop_claims(database_url)


def test_a_refused_request_releases_its_claim(client: TestClient, database_url: str) -> None:
    headers = {"Idempotency-Key": "refused-then-fixed"}
    unknown = client.post("/v1/estimate", json=example_body(model="no/such-model"), headers=headers)
    assert unknown.status_code == 422
    assert claims(database_url) == 0
    fixed = client.post("/v1/estimate", json=example_body(), headers=headers)
    assert fixed.status_code == 200 and fixed.json()["quote_id"]


# --- the billing pull while another process inserts -------------------------------------------

SETTLE = {"billing_settle_s": 1.2, "db_statement_timeout_ms": 1000, "sqlite_busy_timeout_ms": 500}
PULL_DEADLINE_S = 30.0
# The writer inserts at most 1 / WRITER_PAUSE_S quotes a second and the reader pages
# PAGE_LIMIT rows per READER_PAUSE_S plus a request: the reader must be the faster, or on a
# fast machine it never reaches the settle horizon (at 10 ms and 50 ms it did not).
WRITER_PAUSE_S = 0.03
READER_PAUSE_S = 0.01
PAGE_LIMIT = 4


def pull(
    client: TestClient,
    cursor: str | None,
    params: dict[str, Any],
    pause_s: float = 0.0,
    between_pages: Callable[[], None] | None = None,
) -> tuple[list[Any], Any]:
    """Every page from `cursor` until `next_cursor` is null: (items, resume_cursor), calling
    `between_pages` before each next page. Fails after PULL_DEADLINE_S rather than paging
    forever behind a writer that outruns it."""
    items: list[Any] = []
    deadline = time.monotonic() + PULL_DEADLINE_S
    while True:
        assert time.monotonic() < deadline, f"the pull did not reach the end in {PULL_DEADLINE_S} s"
        page_params = {**params, **({"cursor": cursor} if cursor else {})}
        response = client.get("/v1/quotes", params=page_params)
        assert response.status_code == 200, response.text
        page = response.json()
        items.extend(page["items"])
        if page["next_cursor"] is None:
            return items, page["resume_cursor"]
        cursor = page["next_cursor"]
        time.sleep(pause_s)  # let a writer interleave with the page reads
        if between_pages is not None:
            between_pages()


def keyset(items: list[Any]) -> list[tuple[datetime, str]]:
    return [(datetime.fromisoformat(i["created_at"]), i["quote_id"]) for i in items]


def test_billing_pull_neither_skips_nor_repeats_under_concurrent_inserts(
    database_url: str,
) -> None:
    """Another process inserts quotes all along while a billing pull pages through them; the
    pull, then a second one from its `resume_cursor`, return every quote exactly once."""
    settle_s = SETTLE["billing_settle_s"]
    start = (datetime.now(UTC) - timedelta(milliseconds=1)).isoformat()
    params = {"limit": PAGE_LIMIT, "created_after": start}
    with (
        running_client(database_url, **SETTLE) as reader,
        running_client(database_url, **SETTLE) as writer,
    ):
        existing = [reader.post("/v1/estimate", json=example_body()).json() for _ in range(5)]
        written: list[tuple[float, str]] = []
        stop = threading.Event()

        def insert_until_stopped() -> None:
            while not stop.is_set():
                body = writer.post("/v1/estimate", json=example_body()).json()
                written.append((time.monotonic(), body["quote_id"]))
                time.sleep(WRITER_PAUSE_S)

        def after_the_next_insert() -> None:
            """Wait (at most 5 s) for the writer's next quote: every page boundary of the pull
            sees an insert however slow this machine prices, and the reader, reading
            PAGE_LIMIT rows per quote written, still catches up with the writer."""
            seen, deadline = len(written), time.monotonic() + 5
            while len(written) == seen and time.monotonic() < deadline:
                time.sleep(0.005)

        with ThreadPoolExecutor(1) as pool:
            inserting = pool.submit(insert_until_stopped)
            time.sleep(settle_s + 0.5)  # some of the writer's quotes are settled by now
            pull_started = time.monotonic()
            first, resume = pull(
                reader, None, params, READER_PAUSE_S, between_pages=after_the_next_insert
            )
            pull_ended = time.monotonic()
            time.sleep(0.2)
            stop.set()
            inserting.result(timeout=10)
        time.sleep(settle_s + 0.2)
        second, _ = pull(reader, resume, params)

    during = [quote_id for at, quote_id in written if pull_started < at < pull_ended]
    assert len(during) >= 2, "no quote was inserted while the pull ran"
    assert len(first) > 2 * params["limit"], "the pull did not span several pages"
    ids = [i["quote_id"] for i in first + second]
    assert len(ids) == len(set(ids)), "a row was repeated"
    expected = {q["quote_id"] for q in existing} | {quote_id for _, quote_id in written}
    assert None not in expected
    assert set(ids) == expected, f"skipped: {sorted(expected - set(ids))}"
    keys = keyset(first + second)
    assert keys == sorted(keys)


def insert_quote_created_at(database_url: str, created_at: datetime) -> str:
    """A quote row committed now but created earlier (a slow insert), written directly."""
    quote_id = new_quote_id()
    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                Quote.__table__.insert().values(
                    id=quote_id,
                    tenant=TENANT,
                    idempotency_key=None,
                    request_hash="h",
                    request={},
                    response={
                        "energy": {"gpu_j": 1.0, "facility_j": 1.2},
                        "latency": {"total_s": 1.0},
                        "carbon": {"total_g": 0.1},
                    },
                    model_version="roofline test",
                    calibration_id=None,
                    model_id="custom",
                    gpu_id="L4",
                    gpu_count=1,
                    created_at=created_at,
                )
            )
    finally:
        engine.dispose()
    return quote_id


def test_a_quote_committing_late_is_not_skipped(database_url: str) -> None:
    """The race the settle window closes: a quote created before another commits after it
    (a slow insert); a pull that had already passed the later one would never see it."""
    settle_s = SETTLE["billing_settle_s"]
    params = {"limit": 100, "created_after": (datetime.now(UTC) - timedelta(seconds=1)).isoformat()}
    with running_client(database_url, **SETTLE) as client:
        later = client.post("/v1/estimate", json=example_body()).json()
        first, resume = pull(client, None, params)  # `later` is not settled yet
        created = datetime.fromisoformat(later["created_at"]) - timedelta(milliseconds=300)
        earlier = insert_quote_created_at(database_url, created)
        time.sleep(settle_s + 0.1)
        second, _ = pull(client, resume, params)
    first_ids = [i["quote_id"] for i in first]
    second_ids = [i["quote_id"] for i in second]
    assert earlier not in first_ids and later["quote_id"] not in first_ids
    assert second_ids[-2:] == [earlier, later["quote_id"]]


def test_pull_lists_a_quote_once_settled(database_url: str) -> None:
    settle_s = SETTLE["billing_settle_s"]
    start = (datetime.now(UTC) - timedelta(milliseconds=1)).isoformat()
    with running_client(database_url, **SETTLE) as client:
        quote_id = client.post("/v1/estimate", json=example_body()).json()["quote_id"]
        assert client.get("/v1/quotes", params={"created_after": start}).json()["items"] == []
        assert client.get(f"/v1/quotes/{quote_id}").status_code == 200  # by id: at once
        time.sleep(settle_s + 0.1)
        items = client.get("/v1/quotes", params={"created_after": start}).json()["items"]
        assert [i["quote_id"] for i in items] == [quote_id]
