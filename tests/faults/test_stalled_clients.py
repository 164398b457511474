"""Clients that send their headers and part of a body, then stall (slowloris), hold none of a
real uvicorn worker's load-shedding slots: without a valid key they are answered 401 from the
headers alone, and with one their body is refused with 408 after the body-read deadline. Other
callers are served meanwhile (with two slots and two queue places, eight stalled clients would
otherwise leave everyone a 503)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from api_support import bearer, create_key, example_body
from uvicorn_support import Worker, running_worker, worker_settings

STALLED = 8
BODY_READ_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def key(database_url: str) -> str:
    return create_key(database_url, "patient", "estimate")


@pytest.fixture(scope="module")
def worker(
    database_url: str, key: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Worker]:
    settings = worker_settings(
        database_url,
        QUOTES_SHED_MAX_CONCURRENT="2",
        QUOTES_SHED_MAX_QUEUED="2",
        QUOTES_BODY_READ_TIMEOUT_S=str(BODY_READ_TIMEOUT_S),
        # The body-read deadline alone: the per-client caps, which would refuse most of these
        # clients at once, have their own test (test_client_caps.py).
        QUOTES_CLIENT_MAX_IN_FLIGHT_PER_IP="0",
        QUOTES_CLIENT_MAX_IN_FLIGHT_PER_KEY="0",
    )
    log = tmp_path_factory.mktemp("stalled") / "uvicorn.log"
    with running_worker(settings, log) as running:
        yield running


@contextmanager
def stalled_clients(worker: Worker, authorization: str | None) -> Iterator[list[socket.socket]]:
    """`STALLED` connections, each sent a POST's headers (announcing 1000 bytes) and 10 bytes
    of its body, then nothing more."""
    head = (
        "POST /v1/estimate HTTP/1.1\r\nHost: quotes\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n"
    )
    if authorization is not None:
        head += f"Authorization: {authorization}\r\n"
    sockets = []
    try:
        for _ in range(STALLED):
            connection = socket.create_connection(("127.0.0.1", worker.port), timeout=5)
            connection.sendall(head.encode() + b"\r\n" + b'{"model": ')
            sockets.append(connection)
        time.sleep(0.2)  # each is in the worker by now
        yield sockets
    finally:
        for connection in sockets:
            connection.close()


def status_line(connection: socket.socket, timeout_s: float) -> bytes:
    connection.settimeout(timeout_s)
    return connection.recv(65536).split(b"\r\n", 1)[0]


def assert_others_are_served(worker: Worker, key: str) -> None:
    with httpx.Client(base_url=worker.url, timeout=5) as client:
        for _ in range(3):
            assert client.get("/v1/gpus").status_code == 200
            answer = client.post("/v1/estimate", json=example_body(), headers=bearer(key))
            assert answer.status_code == 200, answer.text
            assert answer.json()["quote_id"]


@pytest.mark.parametrize("authorization", [None, "Bearer lq_000000000000_forged"])
def test_a_stalled_client_without_a_valid_key_is_refused_from_its_headers(
    worker: Worker, key: str, authorization: str | None
) -> None:
    with stalled_clients(worker, authorization) as sockets:
        assert_others_are_served(worker, key)
        for connection in sockets:
            assert status_line(connection, 1.0) == b"HTTP/1.1 401 Unauthorized"


def test_a_stalled_client_with_a_key_is_refused_after_the_body_deadline(
    worker: Worker, key: str
) -> None:
    with stalled_clients(worker, f"Bearer {key}") as sockets:
        started = time.monotonic()
        assert_others_are_served(worker, key)
        for connection in sockets:
            assert (
                status_line(connection, BODY_READ_TIMEOUT_S + 3) == b"HTTP/1.1 408 Request Timeout"
            )
        waited_s = time.monotonic() - started
        assert BODY_READ_TIMEOUT_S - 0.5 < waited_s < BODY_READ_TIMEOUT_S + 3


def test_a_body_sent_within_the_deadline_is_served(worker: Worker, key: str) -> None:
    """Slow but within the deadline: the body arrives in three parts over 0.6 s."""
    body = httpx.Request("POST", "/", json=example_body()).content
    head = (
        "POST /v1/estimate HTTP/1.1\r\nHost: quotes\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nAuthorization: Bearer {key}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", worker.port), timeout=5) as connection:
        connection.sendall(head.encode())
        third = len(body) // 3
        for part in (body[:third], body[third : 2 * third], body[2 * third :]):
            time.sleep(0.2)
            connection.sendall(part)
        assert status_line(connection, 5.0) == b"HTTP/1.1 200 OK"
