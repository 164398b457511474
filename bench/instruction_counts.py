"""CPU instructions per estimate, counted by valgrind: a measure this shared VM cannot blur.

    python bench/instruction_counts.py [--count 300] [--output bench/results/instructions.md]

Wall-clock timings on this 2-vCPU VM move by 30-50 % with what else runs on the host, so an
optimisation of a few per cent cannot be seen in them. Instructions retired are counted exactly
(valgrind's callgrind runs the program on a synthetic CPU), whatever the neighbours do; they do
not see cache misses or the cost of each instruction, so they rank code changes, they do not
replace the timed benchmarks.

Each stage runs in a child process under `valgrind --tool=callgrind` twice: once with `--count`
requests after a warm-up, once with the warm-up only; the difference divided by `--count` is the
stage's instructions per request (start-up, imports and warm-up cancel out). Stages:

- `price`: `Estimator.estimate` (resolution, cost model, regressor features and onnxruntime,
  carbon, response object), the same 100 seeded request bodies as bench_batch.py in turn;
- `post`: `POST /v1/estimate` through the whole ASGI app in process (middleware, the fast path,
  validation, pricing, the quote committed to a fresh SQLite file in the event loop, the JSON
  answer), one request at a time, so each quote is its own transaction;
- `batch`: `POST /v1/estimate/batch` with 100 items through the ASGI app (per item);
- `interleaved` and `staged` (not run by default): the cost model (`estimate_request`) and the
  regressor's features of each request, one request after another (`interleaved`) or the cost
  model of every request and then the features of every request (`staged`). The same work in
  two orders: bench/single_stages.py times the first at almost twice the second's stages alone,
  and these counts show whether that is more instructions or the same ones run slower.

Needs valgrind on the PATH (Debian: `apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from report_file import opening, write_report  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "instructions.md"
BODIES = 100
DEFAULT_STAGES = ("price", "post", "batch")
STAGES = (*DEFAULT_STAGES, "interleaved", "staged")
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def _asgi_post(app: Any, path: str) -> Callable[[bytes], Awaitable[bytes]]:
    """A coroutine function posting a JSON body to `app` at `path` and returning the answer's
    body (asserting a 200)."""

    async def post(body: bytes) -> bytes:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "app": app,
        }
        await app(scope, receive, send)
        assert sent[0]["status"] == 200, sent
        return b"".join(m.get("body", b"") for m in sent[1:])

    return post


async def _run_app(stage: str, count: int, database: Path) -> None:
    """Warm up, then `count` requests of `stage` through the app, lifespan included."""
    from bench_batch import items

    from service.config import Settings
    from service.main import create_app

    settings = Settings(
        database_url=f"sqlite:///{database}", run_migrations_on_start=True, log_level="WARNING"
    )
    app = create_app(settings)
    shut_down = await started_app(app)
    bodies = items(app.state.services.estimator, BODIES)
    if stage == "post":
        post = _asgi_post(app, "/v1/estimate")
        encoded = [json.dumps(body).encode() for body in bodies]
        for body in encoded:
            await post(body)
        for i in range(count):
            await post(encoded[i % BODIES])
    else:
        post = _asgi_post(app, "/v1/estimate/batch")
        batch = json.dumps({"items": bodies}).encode()
        await post(batch)
        for _ in range(count // BODIES):
            await post(batch)
    await shut_down()


async def started_app(app: Any) -> Callable[[], Awaitable[None]]:
    """Run `app`'s lifespan startup (in a task, as a server would) and return a coroutine
    function that shuts it down."""
    lifespan: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    started = asyncio.Event()

    async def lifespan_send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    await lifespan.put({"type": "lifespan.startup"})
    serving = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, lifespan.get, lifespan_send)
    )
    await started.wait()

    async def shut_down() -> None:
        await lifespan.put({"type": "lifespan.shutdown"})
        await serving

    return shut_down


def child(stage: str, count: int) -> None:
    """The measured program: `count` requests of `stage` after a warm-up (count 0: warm-up)."""
    import logging

    logging.disable(logging.CRITICAL)
    if stage == "price":
        from bench_batch import items

        from service.pricing.estimator import Estimator
        from service.regressor.runtime import EnergyRegressor
        from service.schemas.estimate_request import EstimateRequest

        estimator = Estimator.from_catalogues(regressor=EnergyRegressor.load())
        requests = [EstimateRequest.model_validate(b) for b in items(estimator, BODIES)]
        for request in requests:
            estimator.estimate(request)
        for i in range(count):
            estimator.estimate(requests[i % BODIES])
        return
    if stage in ("interleaved", "staged"):
        _ordered_child(stage, count)
        return
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(_run_app(stage, count, Path(scratch) / "quotes.sqlite3"))


def _ordered_child(order: str, count: int) -> None:
    """`count` requests' cost model and regressor features, in `order` (see the docstring)."""
    from bench_batch import items

    from service.core.estimate import estimate_request
    from service.pricing.estimator import Estimator
    from service.regressor.runtime import EnergyRegressor
    from service.schemas.estimate_request import EstimateRequest

    estimator = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    regressor, coefficients = estimator.regressor, estimator.coefficients
    assert regressor is not None
    requests = [EstimateRequest.model_validate(b) for b in items(estimator, BODIES)]
    resolved = [estimator.resolve(request) for request in requests]
    estimates = [
        estimate_request(r.architecture, r.workload, r.deployment, coefficients) for r in resolved
    ]

    def cost_model(i: int) -> object:
        r = resolved[i % BODIES]
        return estimate_request(r.architecture, r.workload, r.deployment, coefficients)

    def features(i: int) -> object:
        r = resolved[i % BODIES]
        return regressor.features(
            r.architecture, r.workload, r.deployment, coefficients, estimates[i % BODIES]
        )

    for i in range(BODIES):  # warm-up
        cost_model(i)
        features(i)
    if order == "interleaved":
        for i in range(count):
            cost_model(i)
            features(i)
    else:
        for i in range(count):
            cost_model(i)
        for i in range(count):
            features(i)


def instructions(stage: str, count: int) -> int:
    """Instructions callgrind collected running the child for `stage` with `count` requests."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        stage,
        "--count",
        str(count),
    ]
    # A fixed hash seed: dict and set layouts, hence instruction counts, repeat run to run.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    run = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    found = _COLLECTED.search(run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run failed ({run.returncode}):\n{run.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300, help="requests (batch: items) counted")
    parser.add_argument(
        "--stages", default=",".join(DEFAULT_STAGES), help="CSV of " + ", ".join(STAGES)
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--child", choices=STAGES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.count)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    if args.count < BODIES or args.count % BODIES:
        raise SystemExit(f"--count must be a positive multiple of {BODIES}")
    rows = []
    for stage in args.stages.split(","):
        print(f"[{stage}] counting {args.count} requests and the warm-up alone ...", flush=True)
        measured, baseline = instructions(stage, args.count), instructions(stage, 0)
        per_request = (measured - baseline) / args.count
        print(f"[{stage}] {per_request / 1e6:.3f} M instructions per request", flush=True)
        rows.append(f"| `{stage}` | {args.count} | {per_request / 1e6:.3f} |")
    report = (
        opening("Instructions per estimate (callgrind)")
        + "- instructions retired per request, (run with N requests - run with the warm-up "
        "only) / N, under `valgrind --tool=callgrind`; exact and unaffected by other load, "
        "blind to cache misses (see the module docstring)\n\n"
        "| stage | requests counted | M instructions per request |\n"
        "|---|--:|--:|\n" + "\n".join(rows) + "\n"
    )
    write_report(args.output, report)


if __name__ == "__main__":
    main()
