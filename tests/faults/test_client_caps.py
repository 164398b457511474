"""One client cannot take a real uvicorn worker's load-shedding slots from others: a client IP and
an API key may each have one request in flight here (two slots, two queue places), so the
requests past that are answered 429 at once, and another client's estimate and `GET /v1/gpus`
are served meanwhile. Other clients are told apart by their source address on the loopback
network (127.0.0.2, 127.0.0.3, ...: all of 127/8 reaches a server on 127.0.0.1)."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import pytest
from api_support import bearer, create_key, example_body
from uvicorn_support import Worker, running_worker, worker_settings

GREEDY = 4  # as many as the worker's slots and queue places together
BODY_READ_TIMEOUT_S = 3.0
BATCH_ITEMS = 1000  # long enough to price that the greedy requests overlap the others'


@pytest.fixture(scope="module")
def worker(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    settings = worker_settings(
        database_url,
        QUOTES_SHED_MAX_CONCURRENT="2",
        QUOTES_SHED_MAX_QUEUED="2",
        QUOTES_SHED_MAX_QUEUE_WAIT_S="0.1",
        QUOTES_BODY_READ_TIMEOUT_S=str(BODY_READ_TIMEOUT_S),
        QUOTES_CLIENT_MAX_IN_FLIGHT_PER_IP="1",
        QUOTES_CLIENT_MAX_IN_FLIGHT_PER_KEY="1",
        QUOTES_RATE_LIMITS='{"billing": 0, "estimate": 0}',
    )
    log = tmp_path_factory.mktemp("caps") / "uvicorn.log"
    with running_worker(settings, log) as running:
        yield running


@pytest.fixture(scope="module")
def keys(database_url: str) -> list[str]:
    """One key for the patient caller, then one per greedy connection."""
    return [create_key(database_url, f"tenant-{n}", "estimate") for n in range(GREEDY + 1)]


def connect_from(worker: Worker, source_ip: str) -> socket.socket:
    connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    connection.settimeout(10)
    connection.bind((source_ip, 0))
    connection.connect(("127.0.0.1", worker.port))
    return connection


def post_head(path: str, key: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: quotes\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\nAuthorization: Bearer {key}\r\n\r\n"
    ).encode()


@contextmanager
def open_requests(
    worker: Worker, callers: list[tuple[str, str]], whole_body: bool
) -> Iterator[list[socket.socket]]:
    """One connection per (source IP, key) in `callers`, each sent either a whole 1000-item
    batch (a long request) or the headers and 10 bytes of an estimate's body, then nothing."""
    items = [  # distinct prompts: each item priced on its own
        example_body(workload={"batch_size": 8, "prompt_tokens": 100 + n, "output_tokens": 256})
        for n in range(BATCH_ITEMS)
    ]
    batch = json.dumps({"items": items}).encode()
    with ExitStack() as stack:
        sockets = []
        for source_ip, key in callers:
            connection = stack.enter_context(connect_from(worker, source_ip))
            if whole_body:
                connection.sendall(post_head("/v1/estimate/batch", key, len(batch)) + batch)
            else:
                connection.sendall(post_head("/v1/estimate", key, 1000) + b'{"model": ')
            sockets.append(connection)
        time.sleep(0.3)  # each is in the worker by now
        yield sockets


def answer(connection: socket.socket, timeout_s: float) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and (for a small answer) body of the next response on `connection`;
    a large body is left unread past its first bytes."""
    connection.settimeout(timeout_s)
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    status_line, *lines = head.decode().split("\r\n")
    headers = {name.lower(): value.strip() for name, value in (h.split(":", 1) for h in lines)}
    length = int(headers.get("content-length", "0"))
    while len(body) < min(length, 4096):
        body += connection.recv(65536)
    return int(status_line.split()[1]), headers, body


def assert_another_client_is_served(worker: Worker, key: str) -> None:
    with httpx.Client(base_url=worker.url, timeout=5) as client:
        assert client.get("/v1/gpus").status_code == 200
        served = client.post("/v1/estimate", json=example_body(), headers=bearer(key))
        assert served.status_code == 200, served.text
        assert served.json()["quote_id"]


def assert_one_held_the_rest_refused(sockets: list[socket.socket], held_status: int) -> None:
    """One connection (whichever the worker read first) is answered `held_status` in its own
    time; every other one was refused at once with 429 + Retry-After, a too-many-in-flight
    problem."""
    deadline = time.monotonic() + 1.5  # well before the body-read deadline
    readable: set[socket.socket] = set()
    while len(readable) < GREEDY - 1 and time.monotonic() < deadline:
        ready, _, _ = select.select(sockets, [], [], max(0.0, deadline - time.monotonic()))
        readable.update(ready)
    assert len(readable) >= GREEDY - 1, "the refused requests were not answered at once"
    answers = [answer(connection, BODY_READ_TIMEOUT_S + 30) for connection in sockets]
    assert sorted(status for status, _, _ in answers) == [held_status] + [429] * (GREEDY - 1)
    for status, headers, body in answers:
        if status == 429:
            assert headers["retry-after"] == "1"
            assert headers["content-type"] == "application/problem+json"
            problem = json.loads(body)
            assert problem["status"] == 429
            assert problem["type"].endswith("/too-many-in-flight")


def test_one_address_with_many_long_requests_leaves_others_served(
    worker: Worker, keys: list[str]
) -> None:
    """Four batches from 127.0.0.2, each under its own key: without a cap they hold both slots
    and both queue places, and everyone else is shed with 503."""
    callers = [("127.0.0.2", key) for key in keys[1:]]
    with open_requests(worker, callers, whole_body=True) as sockets:
        assert_another_client_is_served(worker, keys[0])
        assert_one_held_the_rest_refused(sockets, 200)


def test_one_key_flooding_from_many_addresses_leaves_other_keys_served(
    worker: Worker, keys: list[str]
) -> None:
    callers = [(f"127.0.0.{2 + n}", keys[1]) for n in range(GREEDY)]
    with open_requests(worker, callers, whole_body=True) as sockets:
        assert_another_client_is_served(worker, keys[0])
        assert_one_held_the_rest_refused(sockets, 200)


def test_stalled_bodies_from_one_address_hold_one_place(worker: Worker, keys: list[str]) -> None:
    """Partial bodies from one address: one waits out the body-read deadline (408), the rest
    are refused at once rather than each held open for it."""
    callers = [("127.0.0.2", key) for key in keys[1:]]
    with open_requests(worker, callers, whole_body=False) as sockets:
        started = time.monotonic()
        assert_another_client_is_served(worker, keys[0])
        assert_one_held_the_rest_refused(sockets, 408)
        # The held one waited out the deadline (measured from the request's start, a little
        # before `started`); the refused ones did not hold their connections for it.
        assert time.monotonic() - started < BODY_READ_TIMEOUT_S + 3
