"""The per-client caps' parts: which address is the client (X-Forwarded-For only from a trusted
proxy), and the in-flight counts, driven through the middleware with a downstream ASGI app that
holds each request open until told to finish."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from ipaddress import ip_network
from typing import Any

import pytest
from api_support import make_settings
from starlette.types import Message, Receive, Scope, Send

from service.api.client_caps import ClientCapsMiddleware, client_ip
from service.api.deps import PRINCIPAL_STATE_KEY
from service.api.keys import Principal

PROXIES = (ip_network("10.0.0.0/8"), ip_network("fd00::/8"))


def http_scope(peer: str, forwarded: Sequence[str] = (), key: str | None = None) -> Scope:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    scope: dict[str, Any] = {
        "type": "http", "path": "/v1/estimate", "client": (peer, 40000), "headers": headers,
    }  # fmt: skip
    if key is not None:
        scope["state"] = {PRINCIPAL_STATE_KEY: Principal("t", frozenset({"estimate"}), key)}
    return scope


@pytest.mark.parametrize(
    ("peer", "forwarded", "proxies", "client"),
    [
        # No proxy configured: the header is the client's own word, ignored.
        ("203.0.113.7", ["198.51.100.1"], (), "203.0.113.7"),
        # A peer that is not a trusted proxy cannot name someone else.
        ("203.0.113.7", ["198.51.100.1"], PROXIES, "203.0.113.7"),
        # A trusted proxy names the client.
        ("10.1.2.3", ["198.51.100.1"], PROXIES, "198.51.100.1"),
        # Rightmost untrusted hop: what the client put in front (a forged 1.2.3.4) is skipped,
        # and so is a second trusted proxy in the chain.
        ("10.1.2.3", ["1.2.3.4, 198.51.100.1, 10.9.9.9"], PROXIES, "198.51.100.1"),
        # Two header lines are one list, in order.
        ("10.1.2.3", ["1.2.3.4", "198.51.100.1"], PROXIES, "198.51.100.1"),
        ("fd00::1", ["2001:db8::5"], PROXIES, "2001:db8::5"),
        # No header, or only proxies in it: the nearest proxy is all that is known.
        ("10.1.2.3", [], PROXIES, "10.1.2.3"),
        ("10.1.2.3", ["10.4.4.4"], PROXIES, "10.1.2.3"),
        # Garbage where the client's address should be: counted against the proxy.
        ("10.1.2.3", ["not-an-ip"], PROXIES, "10.1.2.3"),
    ],
)
def test_the_client_address(
    peer: str, forwarded: list[str], proxies: tuple[Any, ...], client: str
) -> None:
    assert client_ip(http_scope(peer, forwarded), proxies) == client


def test_trusted_proxies_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUOTES_CLIENT_TRUSTED_PROXIES", '["10.0.0.0/8", "fd00::/8"]')
    settings = make_settings("sqlite://")
    assert settings.client_trusted_proxies == PROXIES


class HeldApp:
    """Answers 200 to each request once `release` is set; counts the requests it saw."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.seen = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.seen += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def statuses(caps: ClientCapsMiddleware, scopes: list[Scope], held: HeldApp) -> list[int]:
    """Start every request, let the held ones finish, and return each one's status."""
    answers: list[list[int]] = [[] for _ in scopes]

    async def run(scope: Scope, answer: list[int]) -> None:
        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer.append(message["status"])

        await caps(scope, receive, send)

    tasks = [asyncio.create_task(run(s, a)) for s, a in zip(scopes, answers, strict=True)]
    await asyncio.sleep(0.01)
    held.release.set()
    await asyncio.gather(*tasks)
    return [answer[0] for answer in answers]


def test_each_address_and_each_key_is_held_to_its_cap() -> None:
    held = HeldApp()
    caps = ClientCapsMiddleware(held, max_per_ip=2, max_per_key=3, retry_after_s=1)
    scopes = [
        *(http_scope("192.0.2.1", key=f"k{n}") for n in range(4)),  # one address, four keys
        *(http_scope(f"192.0.2.{10 + n}", key="flood") for n in range(5)),  # one key, five
        http_scope("192.0.2.99"),  # no key (a public route)
    ]
    got = asyncio.run(statuses(caps, scopes, held))
    assert got == [200, 200, 429, 429, 200, 200, 200, 429, 429, 200]
    assert held.seen == 6
    # Nothing is left counted once the requests finished: the tables only hold open requests.
    assert len(caps.by_ip) == 0 and len(caps.by_key) == 0


def test_a_trusted_proxy_does_not_make_its_clients_one() -> None:
    held = HeldApp()
    caps = ClientCapsMiddleware(
        held, max_per_ip=1, max_per_key=0, retry_after_s=1, trusted_proxies=PROXIES
    )
    scopes = [http_scope("10.0.0.1", [f"198.51.100.{n % 3}"]) for n in range(6)]
    assert asyncio.run(statuses(caps, scopes, held)) == [200, 200, 200, 429, 429, 429]


@pytest.mark.parametrize(
    ("overrides", "caps"),
    [
        ({}, (48, 48)),  # (32 slots + 64 queue places) / 2
        ({"shed_max_concurrent": 2, "shed_max_queued": 3}, (2, 2)),  # (2 + 3) // 2
        ({"shed_max_concurrent": 0}, (0, 0)),  # no shedding: nothing to keep for others
        ({"client_max_in_flight_per_ip": 0, "client_max_in_flight_per_key": 5}, (0, 5)),
    ],
)
def test_the_caps_left_unset_are_half_the_slots_and_queue(
    overrides: dict[str, int], caps: tuple[int, int]
) -> None:
    assert make_settings("sqlite://", **overrides).client_caps() == caps
