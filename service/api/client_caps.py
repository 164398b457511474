"""Per-client concurrency caps: one client IP, and one API key, may each have at most a fixed
number of requests in flight in a worker; past that a request is answered 429 + Retry-After
(problem+json) at once, before its body is read and before it waits for a load-shedding slot.

Load shedding (service/api/load_shedding.py) bounds what a worker takes on as a whole, but first
come first served: one client that opens many requests and stalls (sending its body slowly, or
not reading a large answer), or one key that floods, would hold every slot and queue place, and
everyone else would get 503. With each client held to fewer requests than the worker has slots,
the rest stay free for others.

A request counts from the moment its headers are in (after its key is checked, so a refused
caller counts nothing) until its answer is sent, its body read included: a client that stalls
mid-body holds one of its own places until the body-read deadline, nobody else's.

The client's IP is the socket peer; behind a reverse proxy every request would seem to come from
the proxy, so `X-Forwarded-For` is honoured only when the peer is one of the configured trusted
proxies, and then read from the right, skipping trusted proxies, as RFC 7239 section 7.4
advises: the first address no trusted proxy wrote is the client (the ones further left are
whatever the client chose to send). The counts are per worker process, like the shedding slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Network, IPv6Network, ip_address

from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.deps import PRINCIPAL_STATE_KEY
from service.api.keys import Principal
from service.api.load_shedding import EXEMPT_PATHS
from service.api.problems import problem_response
from service.errors import ServiceError

Network = IPv4Network | IPv6Network


class TooManyInFlight(ServiceError):
    status, title, type_slug = 429, "Too Many Requests", "too-many-in-flight"


def _trusted(address: str, proxies: Sequence[Network]) -> bool:
    try:
        parsed = ip_address(address.strip())
    except ValueError:
        return False
    return any(parsed in network for network in proxies)


def client_ip(scope: Scope, trusted_proxies: Sequence[Network]) -> str:
    """The calling client's IP: the socket peer, or, when the peer is a trusted proxy, the
    rightmost `X-Forwarded-For` address that is not itself a trusted proxy (see module)."""
    client = scope.get("client")
    peer = client[0] if client else "unknown"
    if not trusted_proxies or not _trusted(peer, trusted_proxies):
        return peer
    forwarded: list[str] = []
    for name, value in scope.get("headers", []):
        if name == b"x-forwarded-for":
            forwarded.extend(value.decode("latin-1").split(","))
    for hop in reversed(forwarded):
        hop = hop.strip()
        if not _trusted(hop, trusted_proxies):
            try:
                return str(ip_address(hop))
            except ValueError:
                return peer  # garbage written by a trusted proxy's client: count the proxy
    return peer  # every hop a trusted proxy (or none named): the nearest one is the client


class InFlightCounts:
    """Requests in flight by client; an entry is dropped when its count returns to zero, so the
    table holds only the clients with a request open (bounded by the worker's connections)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._counts)

    def get(self, client: str) -> int:
        return self._counts.get(client, 0)

    def add(self, client: str) -> None:
        self._counts[client] = self._counts.get(client, 0) + 1

    def remove(self, client: str) -> None:
        left = self._counts[client] - 1
        if left:
            self._counts[client] = left
        else:
            del self._counts[client]


class ClientCapsMiddleware:
    """At most `max_per_ip` requests in flight per client IP and `max_per_key` per API key
    (0: no cap of that kind); operational routes (health, metrics) are not counted."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_per_ip: int,
        max_per_key: int,
        retry_after_s: int,
        trusted_proxies: Sequence[Network] = (),
    ) -> None:
        self.app = app
        self.max_per_ip = max_per_ip
        self.max_per_key = max_per_key
        self.retry_after_s = retry_after_s
        self.trusted_proxies = tuple(trusted_proxies)
        self.by_ip = InFlightCounts()
        self.by_key = InFlightCounts()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        ip = client_ip(scope, self.trusted_proxies) if self.max_per_ip else None
        principal: Principal | None = scope.get("state", {}).get(PRINCIPAL_STATE_KEY)
        key = principal.key_prefix if principal is not None and self.max_per_key else None
        refusal = self._refusal(ip, key)
        if refusal is not None:
            await problem_response(refusal)(scope, receive, send)
            return
        if ip is not None:
            self.by_ip.add(ip)
        if key is not None:
            self.by_key.add(key)
        try:
            await self.app(scope, receive, send)
        finally:
            if ip is not None:
                self.by_ip.remove(ip)
            if key is not None:
                self.by_key.remove(key)

    def _refusal(self, ip: str | None, key: str | None) -> TooManyInFlight | None:
        if ip is not None and self.by_ip.get(ip) >= self.max_per_ip:
            held, limit, who = self.by_ip.get(ip), self.max_per_ip, f"client address {ip}"
        elif key is not None and self.by_key.get(key) >= self.max_per_key:
            held, limit, who = self.by_key.get(key), self.max_per_key, "this API key"
        else:
            return None
        return TooManyInFlight(
            f"{who} has {held} requests in progress, the most one client may have at once in "
            f"this worker is {limit}; retry when one has finished",
            headers={"Retry-After": str(self.retry_after_s)},
        )
