"""API keys, scopes and tenants; the billing pull; observations (keys configured); through the
client package, each key its own client."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from api_support import (
    bearer,
    create_key,
    example_body,
    make_settings,
    quotes_client,
    running_client,
    services_of,
    take_database_away,
)
from fastapi.testclient import TestClient
from llm_energy_quotes_client import (
    Forbidden,
    InvalidRequest,
    NotFound,
    QuotesClient,
    Unauthorized,
)

from service.api.keys import key_prefix
from service.db.base import utc_now
from service.db.engine import Database
from service.db.repositories import ApiKeyRepository


@pytest.fixture(scope="module")
def keys(database_url: str) -> dict[str, str]:
    return {
        "acme": create_key(database_url, "acme", "estimate,billing,observe"),
        "acme_gateway": create_key(database_url, "acme", "estimate"),
        "globex": create_key(database_url, "globex", "estimate,billing,observe"),
        "revoked": create_key(database_url, "acme", "admin"),
    }


@pytest.fixture(scope="module")
def client(database_url: str, keys: dict[str, str]) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def as_key(client: TestClient, keys: dict[str, str]) -> dict[str, QuotesClient]:
    """A client per key of `keys`, and `anonymous` without one."""
    return {
        **{name: quotes_client(client, key) for name, key in keys.items()},
        "anonymous": quotes_client(client),
    }


def test_keys_are_required_once_any_exists(
    as_key: dict[str, QuotesClient], client: TestClient, keys: dict[str, str]
) -> None:
    with pytest.raises(Unauthorized) as missing:
        as_key["anonymous"].estimate(example_body())
    assert missing.value.headers["WWW-Authenticate"].startswith("Bearer")
    with pytest.raises(Unauthorized):
        quotes_client(client, keys["acme"][:-4] + "AAAA").estimate(example_body())  # forged
    with pytest.raises(Unauthorized):
        next(quotes_client(client, "not-a-key").quotes())
    health = as_key["anonymous"].health()
    assert health.open_dev_mode is False and health.auth_mode == "api-key"
    assert len(as_key["anonymous"].gpus().items) > 10  # catalogues stay public


def test_scopes_are_enforced(as_key: dict[str, QuotesClient]) -> None:
    gateway = as_key["acme_gateway"]
    created = gateway.estimate(example_body())
    assert created.quote_id is not None
    with pytest.raises(Forbidden) as refused:
        gateway.quote(created.quote_id)
    assert refused.value.headers["content-type"].startswith("application/problem+json")


def test_revoked_key_is_refused(
    as_key: dict[str, QuotesClient], keys: dict[str, str], database_url: str
) -> None:
    assert as_key["revoked"].estimate(example_body()).quote_id
    database = Database(make_settings(database_url))
    with database.sessions.begin() as session:
        row = ApiKeyRepository(session).by_prefix(key_prefix(keys["revoked"]) or "")
        assert row is not None
        row.revoked_at = utc_now()
    database.dispose()
    with pytest.raises(Unauthorized):
        as_key["revoked"].estimate(example_body())


def test_a_cached_key_is_revoked_everywhere_within_the_cache_time(database_url: str) -> None:
    """The key store's clock is the test's: the cache's age is what the test sets, not how long
    the requests happened to take, so both assertions always run."""
    key = create_key(database_url, "acme", "estimate")
    cache_s = 0.5
    now_s = [1000.0]
    with running_client(database_url, api_key_cache_s=cache_s) as cached_client:
        services_of(cached_client).keys.clock = lambda: now_s[0]
        gateway = quotes_client(cached_client, key)
        assert gateway.estimate(example_body()).quote_id  # read from the database at 1000.0 s
        database = Database(make_settings(database_url))
        with database.sessions.begin() as session:
            row = ApiKeyRepository(session).by_prefix(key_prefix(key) or "")
            assert row is not None
            row.revoked_at = utc_now()
        database.dispose()
        # Within the cache time the worker still trusts what it read (no database read)...
        now_s[0] = 1000.0 + cache_s - 0.01
        assert gateway.estimate(example_body()).quote_id is not None
        # ...and once it has passed, the key is refused.
        now_s[0] = 1000.0 + cache_s
        with pytest.raises(Unauthorized):
            gateway.estimate(example_body())


OBSERVED = {"gpu_j": 790.0, "measured_with": "nvml", "measured_at": "2026-11-22T10:00:05Z"}


def test_a_tenant_cannot_see_another_tenants_quote(as_key: dict[str, QuotesClient]) -> None:
    acme, globex = as_key["acme"], as_key["globex"]
    created = acme.estimate(example_body())
    assert created.quote_id is not None
    assert acme.quote(created.quote_id).response["energy"] == created.energy.model_dump()
    with pytest.raises(NotFound) as other:
        globex.quote(created.quote_id)
    assert created.quote_id not in {q.quote_id for q in globex.quotes(limit=1000)}
    with pytest.raises(NotFound) as observe:
        globex.post_observation(created.quote_id, OBSERVED)
    csv_text = "".join(page.text for page in globex.quote_csv_pages(limit=1000))
    assert csv_text.startswith("quote_id") and created.quote_id not in csv_text
    # Another tenant's quote is indistinguishable from one that does not exist.
    with pytest.raises(NotFound) as unknown:
        globex.quote("q_00000000000000000000000000")
    assert other.value.title == unknown.value.title == observe.value.title
    assert other.value.type == unknown.value.type
    assert other.value.headers["content-type"].startswith("application/problem+json")
    assert acme.quote(created.quote_id).observations == [], "the refused observation was stored"


def test_idempotency_keys_are_scoped_to_the_tenant(as_key: dict[str, QuotesClient]) -> None:
    acme = as_key["acme"].estimate(example_body(), idempotency_key="shared")
    globex = as_key["globex"].estimate(
        example_body(hardware={"gpu": "L4"}), idempotency_key="shared"
    )
    assert globex.quote_id != acme.quote_id
    assert globex.gpu == "L4" and acme.gpu == "H100-SXM5-80GB"


def test_pagination_is_stable_while_quotes_are_inserted(as_key: dict[str, QuotesClient]) -> None:
    acme = as_key["acme"]
    start = datetime.now(UTC) - timedelta(milliseconds=1)
    first = [acme.estimate(example_body()).quote_id for _ in range(5)]
    inserted: list[str | None] = []
    ids: list[str] = []
    pages = 0
    for page in acme.quote_pages(limit=2, created_after=start):
        pages += 1
        ids.extend(q.quote_id for q in page.items)
        if len(inserted) < 6 and page.next_cursor is not None:  # three rounds between pages
            inserted.extend(acme.estimate(example_body()).quote_id for _ in range(2))
    assert pages == 6  # 11 rows, 2 a page
    assert len(ids) == len(set(ids)), "a row was repeated"
    assert set(first + inserted) == set(ids), "a row was skipped"
    assert ids[:5] == first
    stamps = [acme.quote(i).created_at for i in ids]
    assert stamps == sorted(stamps)
    before = [
        q.quote_id for q in acme.quotes(limit=3, created_after=start, created_before=stamps[3])
    ]
    assert before == ids[:3]


def test_csv_format(as_key: dict[str, QuotesClient]) -> None:
    globex = as_key["globex"]
    created = globex.estimate(example_body(metadata={"customer": "initech"}))
    rows = [
        row
        for page in globex.quote_csv_pages(limit=2)
        for row in csv.DictReader(io.StringIO(page.text))
    ]
    row = next(r for r in rows if r["quote_id"] == created.quote_id)
    assert float(row["gpu_j"]) == pytest.approx(created.energy.gpu_j, rel=1e-12)
    assert "initech" in row["metadata"]
    assert len(rows) == len({r["quote_id"] for r in rows}) == len(list(globex.quotes()))
    # The interval and the carbon's parts, each the quote's own figure.
    energy, carbon = created.energy, created.carbon
    for column, expected in (
        ("gpu_j_low", energy.gpu_j_low),
        ("gpu_j_high", energy.gpu_j_high),
        ("total_g_low", carbon.total_g_low),
        ("total_g_high", carbon.total_g_high),
        ("operational_g", carbon.operational_g),
        ("embodied_g", carbon.embodied_g),
        ("water_l", getattr(carbon, "water_l")),  # noqa: B009  (an extra member of the model)
        ("water_l_high", getattr(carbon, "water_l_high")),  # noqa: B009
        ("embodied_g_low", getattr(carbon, "embodied_g_low")),  # noqa: B009
    ):
        assert float(row[column]) == pytest.approx(expected, rel=1e-12), column
    assert float(row["operational_g"]) + float(row["embodied_g"]) == pytest.approx(
        float(row["total_g"]), rel=1e-9
    )


def test_jsonl_format_pages_like_the_json_pull(
    client: TestClient, keys: dict[str, str], as_key: dict[str, QuotesClient]
) -> None:
    globex = as_key["globex"]
    globex.estimate(example_body(metadata={"customer": "jsonl"}))
    expected = [q.model_dump(mode="json") for q in globex.quotes()]
    rows: list[dict[str, object]] = []
    params: dict[str, object] = {"format": "jsonl", "limit": 2}
    for _ in range(100):  # bounded: a page of 2 at a time
        answer = client.get("/v1/quotes", params=params, headers=bearer(keys["globex"]))
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("application/x-ndjson")
        rows += [json.loads(line) for line in answer.text.splitlines()]
        if "x-next-cursor" not in answer.headers:
            break
        params["cursor"] = answer.headers["x-next-cursor"]
    assert [row["quote_id"] for row in rows] == [row["quote_id"] for row in expected]
    assert rows[-1]["gpu_j"] == expected[-1]["gpu_j"]
    assert answer.headers["x-resume-cursor"]


def test_bad_cursor_and_limits_are_422(as_key: dict[str, QuotesClient]) -> None:
    acme = as_key["acme"]
    for params in (
        {"cursor": "garbage"},
        {"limit": 0},
        {"created_after": "2026-01-01T00:00:00"},
    ):
        with pytest.raises(InvalidRequest):
            next(acme.quote_pages(**params))  # type: ignore[arg-type]


def test_observations_are_stored_once_per_key(as_key: dict[str, QuotesClient]) -> None:
    acme = as_key["acme"]
    created = acme.estimate(example_body())
    assert created.quote_id is not None
    body = {**OBSERVED, "total_s": 3.5}
    first = acme.post_observation(created.quote_id, body, idempotency_key="obs-1")
    again = acme.post_observation(created.quote_id, body, idempotency_key="obs-1")
    assert first.observation_id == again.observation_id
    assert (first.gpu_j, first.total_s, first.quote_id) == (790.0, 3.5, created.quote_id)
    with pytest.raises(InvalidRequest):
        acme.post_observation(created.quote_id, {**body, "gpu_j": 800.0}, idempotency_key="obs-1")
    assert [o.gpu_j for o in acme.quote(created.quote_id).observations] == [790.0]
    with pytest.raises(InvalidRequest) as naive:
        acme.post_observation(created.quote_id, {**body, "measured_at": "2026-11-22T10:00:05"})
    assert naive.value.errors[0].loc == "measured_at"
    with pytest.raises(NotFound):
        acme.post_observation("q_nope", body)


def test_known_keys_still_estimate_while_the_database_is_away(
    database_url: str, keys: dict[str, str]
) -> None:
    with running_client(database_url) as fresh:
        acme = quotes_client(fresh, keys["acme"])
        assert acme.estimate(example_body()).quote_id
        take_database_away(fresh)
        unstored = acme.estimate(example_body())
        assert unstored.quote_id is None and unstored.energy.gpu_j > 0
        with pytest.raises(Unauthorized):
            quotes_client(fresh, keys["globex"]).estimate(example_body())
