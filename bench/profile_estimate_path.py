"""Where the estimate path's CPU goes, in-process: `service.main`'s ASGI app (or the bare app of
bench/load/bare_app.py) driven by raw ASGI calls with the realistic bodies of bench/load/bodies.py,
`--connections` at a time, on a fresh migrated SQLite file, with no HTTP server or client.

    python bench/profile_estimate_path.py --requests 3000 [--app bare] [--keyed]
                                          [--profile out.prof]

Prints the process's and the event loop thread's CPU time per request (the rest of the process's
is the pricing thread's, mostly; with `--keyed`, the threads that claim idempotency keys too)
and the requests per pricing pass. `--keyed` sends every request with an Idempotency-Key of its
own, as a gateway that retries safely does (each key new: looked up, claimed, stored).
`--profile` writes a cProfile of the event loop thread timed by its own CPU time
(time.thread_time), so that waiting for the GIL behind the pricing thread does not count; read
it with `python -m pstats`.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPOSITORY), str(REPOSITORY / "bench")]

from load.bodies import MODELS, estimate_body  # noqa: E402


async def post(
    app: Any, body: bytes, path: str = "/v1/estimate", idempotency_key: str | None = None
) -> int:
    """The status `app` answers a POST of `body` to `path` (with `idempotency_key`, if given)
    with (the answer is dropped)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
        "headers": [(b"host", b"bench"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
        "state": {},
    }  # fmt: skip
    if idempotency_key is not None:
        scope["headers"].append((b"idempotency-key", idempotency_key.encode()))
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect: the client stays
        raise AssertionError

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    await app(scope, receive, send)
    return statuses[0]


async def run(args: argparse.Namespace) -> None:
    if args.app == "bare":
        from load.bare_app import app
    else:
        from service.main import create_app

        app = create_app()
    async with app.router.lifespan_context(app):
        rng = random.Random(args.seed)
        candidates = [
            json.dumps(estimate_body(rng, set(MODELS)), separators=(",", ":")).encode()
            for _ in range(400)
        ]
        bodies = [body for body in candidates if await post(app, body) == 200]
        services = getattr(app.state, "services", None)

        keys = itertools.count()

        async def measured(count: int) -> None:
            numbers = iter(range(count))

            async def connection() -> None:
                for number in numbers:
                    key = f"profile-{next(keys)}" if args.keyed else None
                    await post(app, bodies[number % len(bodies)], idempotency_key=key)

            await asyncio.gather(*(connection() for _ in range(args.connections)))

        await measured(args.requests // 2)  # warm-up
        passes = services.quotes.pricer.passes if services else 0
        profile = cProfile.Profile(time.thread_time) if args.profile else None
        process_s, loop_s, wall_s = time.process_time(), time.thread_time(), time.perf_counter()
        if profile is not None:
            profile.enable()
        await measured(args.requests)
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
        n = args.requests
        per_pass = n / max(1, services.quotes.pricer.passes - passes) if services else 0.0
        print(
            f"{args.app}{' keyed' if args.keyed else ''}: {n} requests, {len(bodies)} bodies; "
            f"CPU per request: process "
            f"{(time.process_time() - process_s) / n * 1e6:.0f} µs, event loop thread "
            f"{(time.thread_time() - loop_s) / n * 1e6:.0f} µs; wall per request "
            f"{(time.perf_counter() - wall_s) / n * 1e6:.0f} µs; requests per pricing pass "
            f"{per_pass:.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", choices=("service", "bare"), default="service")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--keyed", action="store_true", help="a new Idempotency-Key on every request"
    )
    parser.add_argument("--profile", type=Path, default=None, help="cProfile output file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="profile-path-") as scratch:
        url = f"sqlite:///{Path(scratch) / 'quotes.sqlite3'}"
        os.environ.update(
            QUOTES_DATABASE_URL=url,
            QUOTES_RUN_MIGRATIONS_ON_START="false",
            QUOTES_LOG_LEVEL="WARNING",
            QUOTES_RATE_LIMITS=json.dumps({"estimate": 1e9}),  # one client sends it all
        )
        from service.db import migrate

        migrate.upgrade(url)
        uvloop.install()
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
