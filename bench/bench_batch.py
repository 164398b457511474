"""Throughput of batch pricing: estimates per second for 1000-item batches, at four depths.

    python bench/bench_batch.py [--items 1000] [--repeat 5] [--http-s 20] [--workers 2]
                                [--clients 6] [--analytical-only] [--output PATH]

A seeded, realistic mix of items (a handful of models and GPU layouts, varied batch sizes,
prompts and outputs) is priced:

1. core: the analytical cost model only, every item in one `estimate_contexts` evaluation
   (the items' contexts: model, deployment, engine), beside one `estimate_request` (a list of
   one) per item;
2. estimator: `Estimator.price` of the whole list (resolution, cost model, regressor features
   and onnxruntime in 64-request slices, carbon, response documents), beside `Estimator.estimate`
   (a list of one) per item;
3. endpoint: `POST /v1/estimate/batch` through the ASGI app in process (FastAPI TestClient:
   JSON parsing and validation, pricing, one SQLite transaction storing every quote, JSON
   response), on a fresh migrated SQLite file;
4. server: the same batch over HTTP to a real `uvicorn --workers N` (uvloop, httptools, SQLite,
   quotes stored as in production), 3N clients on this machine posting it back to back for
   `--http-s` seconds (bench/load/batch_clients.py; uvicorn's workers race to accept
   connections, so with 3 clients per worker each worker almost always gets one: all six on one
   of two workers happens 1 time in 32, and the report's busiest-worker share shows it): what
   the machine sustains with every core pricing, the clients' own CPU included.

Depths 1-3 run in this one thread and are timed `--repeat` times after a warm-up batch; the best
and median wall-clock time per batch are turned into estimates per second. The endpoint's
stages, timed one by one, show where its time goes. Results go to bench/results/batch.md.
`--analytical-only` prices every depth without the learned regressor
(QUOTES_USE_REGRESSOR=false), to show what the regressor costs per item.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402
from load.batch_clients import BatchRun, run_batches  # noqa: E402
from load.bodies import encoded_post  # noqa: E402
from load.server import machine_busy_cpu_s, migrated_server_env, uvicorn_server  # noqa: E402

from service.api.keys import Principal  # noqa: E402
from service.api.routes.estimate import _batch_json  # noqa: E402
from service.config import Settings  # noqa: E402
from service.core.estimate import (  # noqa: E402
    estimate_contexts,
    estimate_request,
    pricing_context,
)
from service.db.ids import new_quote_id  # noqa: E402
from service.errors import ServiceError  # noqa: E402
from service.main import create_app  # noqa: E402
from service.pricing.estimator import Estimator  # noqa: E402
from service.pricing.regressor.runtime import EnergyRegressor  # noqa: E402
from service.pricing.resolve import ResolvedRequest, resolve_request  # noqa: E402
from service.quotes.service import (  # noqa: E402
    QuoteTimings,
    _Priced,
    _quote_row,
    request_fingerprint,
)
from service.schemas.estimate_request import EstimateRequest  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "batch.md"
TARGET_PER_S = 20_000
# (model, GPU, tensor, expert, weights): dense, GQA 70B, MoE, MoE with EP, sliding window, FP8.
DEPLOYMENTS = (
    ("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB", 1, 1, "bf16"),
    ("meta-llama/Llama-3.1-70B-Instruct", "H100-SXM5-80GB", 4, 1, "bf16"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "A100-SXM4-80GB", 4, 1, "bf16"),
    ("Qwen/Qwen3-30B-A3B", "H100-SXM5-80GB", 1, 2, "bf16"),
    ("google/gemma-2-9b-it", "L40S", 1, 1, "bf16"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "H200-SXM-141GB", 4, 1, "fp8"),
)
REGIONS = ("US-CA", "DE", "FR", "PL", None)


def items(estimator: Estimator, count: int, seed: int = 7) -> list[dict[str, Any]]:
    """`count` request bodies drawn from DEPLOYMENTS with varied workloads; draws that would not
    fit in GPU memory are skipped, so every item is priced and stored."""
    rng = random.Random(seed)
    bodies: list[dict[str, Any]] = []
    while len(bodies) < count:
        model, gpu, tensor, expert, weights = rng.choice(DEPLOYMENTS)
        body: dict[str, Any] = {
            "model": model,
            "workload": {
                "batch_size": rng.choice((1, 2, 4, 8, 16, 32)),
                "prompt_tokens": rng.randint(16, 3000),
                "output_tokens": rng.randint(1, 1000),
            },
            "hardware": {
                "gpu": gpu,
                "count": tensor * expert,
                "parallelism": {"tensor": tensor, "expert": expert, "pipeline": 1},
            },
            "precision": {"weights": weights},
        }
        region = rng.choice(REGIONS)
        if region is not None:
            body["datacenter"] = {"region": region}
        try:
            estimator.estimate(EstimateRequest.model_validate(body))
        except ServiceError:
            continue
        bodies.append(body)
    return bodies


def wall_s(call: Callable[[], object], repeat: int) -> list[float]:
    call()  # warm-up: plans, graphs and sessions built as in a running service
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def core_calls(
    estimator: Estimator, resolved: list[ResolvedRequest]
) -> tuple[Callable[[], object], Callable[[], object]]:
    groups: dict[Any, list[ResolvedRequest]] = {}
    for r in resolved:
        groups.setdefault((r.architecture, r.deployment, r.engine), []).append(r)

    def batched() -> None:
        estimate_contexts(
            [
                (
                    pricing_context(arch, deployment, estimator.engine_coefficients[engine]),
                    [m.workload for m in members],
                )
                for (arch, deployment, engine), members in groups.items()
            ]
        )

    def one_by_one() -> None:
        for r in resolved:
            coefficients = estimator.engine_coefficients[r.engine]
            estimate_request(r.architecture, r.workload, r.deployment, coefficients)

    return batched, one_by_one


def endpoint_client(database: Path, use_regressor: bool = True) -> TestClient:
    settings = Settings(
        database_url=f"sqlite:///{database}",
        run_migrations_on_start=True,
        log_level="WARNING",
        use_regressor=use_regressor,
    )
    return TestClient(create_app(settings))


def stage_table(client: TestClient, bodies: list[dict[str, Any]], endpoint_s: float) -> str:
    """The endpoint's work, stage by stage, done in this thread by the functions its route
    calls (best of 3 each); the rest of the endpoint's time is HTTP, ASGI and FastAPI."""
    services = client.app.state.services  # type: ignore[attr-defined]
    principal = Principal(tenant="bench", scopes=frozenset({"estimate"}), key_prefix=None)
    raw = json.dumps({"items": bodies}).encode()
    requests = [EstimateRequest.model_validate(body) for body in bodies]
    results = services.estimator.price(requests)
    assert all(not isinstance(r, ServiceError) for r in results)
    priced = [
        _Priced(r, a)  # type: ignore[arg-type]
        for r, a in zip(requests, results, strict=True)
    ]
    stages: list[tuple[str, Callable[[], object]]] = [
        ("parse JSON body", lambda: json.loads(raw)),
        (
            "validate items (EstimateRequest)",
            lambda: [EstimateRequest.model_validate(body) for body in bodies],
        ),
        (
            "price: cost model, features, regressor, carbon, responses (`Estimator.price`)",
            lambda: services.estimator.price(requests),
        ),
        (
            "store: quote rows, one INSERT and commit",
            lambda: asyncio.run(  # the storing half of QuoteService.quote
                services.quotes._store(
                    [
                        _Priced(r, a)  # type: ignore[arg-type]
                        for r, a in zip(requests, results, strict=True)
                    ],
                    "bench",
                    QuoteTimings(),
                )
            ),
        ),
        (
            "request fingerprints (made for Idempotency-Key estimates only, not in a batch)",
            lambda: [request_fingerprint(r, False) for r in requests],
        ),
        (
            "store, part: quote rows (ids, documents with their ids, requests as dicts)",
            lambda: [_quote_row(p, new_quote_id(), "bench", None) for p in priced],
        ),
        (
            "price and store: `QuoteService.quote`",
            lambda: asyncio.run(services.quotes.quote(requests, tenant=principal.tenant)),
        ),
        (
            "answer: the batch's JSON, joined once from the documents' parts (written when priced)",
            lambda: _batch_json([r.document.json_parts() for r in results]),
        ),
    ]
    lines = [
        "| stage (1000 items) | best of 3 [ms] | µs per item |",
        "|---|--:|--:|",
        f"| whole endpoint (median above) | {endpoint_s * 1e3:.1f} | {endpoint_s * 1e3:.1f} |",
    ]
    for label, call in stages:
        best = min(wall_s(call, 3))
        lines.append(f"| {label} | {best * 1e3:.1f} | {best * 1e6 / len(bodies):.1f} |")
    return "\n".join(lines)


@dataclass
class HttpResult:
    run: BatchRun
    server_cpu_s: float
    rest_cpu_s: float  # the machine's busy CPU but the server's and the clients'
    busiest_worker_share: float  # of the workers' CPU (0.5: an even split of two)


def over_http(
    bodies: list[dict[str, Any]],
    workers: int,
    clients: int,
    seconds: float,
    scratch: Path,
    use_regressor: bool = True,
) -> HttpResult:
    """The batch posted back to back by `clients` clients to `uvicorn --workers <workers>` on a
    fresh SQLite file for `seconds`, and the CPU the server and the rest of the machine used."""
    env = migrated_server_env(
        f"sqlite:///{scratch / 'http.sqlite3'}",
        QUOTES_USE_REGRESSOR=str(use_regressor).lower(),
    )
    with uvicorn_server(env, workers, scratch / "uvicorn.log") as server:
        raw = encoded_post("/v1/estimate/batch", {"items": bodies}, f"127.0.0.1:{server.port}")
        warm = asyncio.run(run_batches("127.0.0.1", server.port, raw, clients, 3.0))
        assert warm.statuses == {200: warm.batches}, warm.statuses
        server_before, machine_before = server.cpu_seconds(), machine_busy_cpu_s()
        workers_before = server.worker_cpu_seconds()
        run = asyncio.run(run_batches("127.0.0.1", server.port, raw, clients, seconds))
        server_s = server.cpu_seconds() - server_before
        rest_s = machine_busy_cpu_s() - machine_before - server_s - run.client_cpu_s
        used = sorted(
            (
                cpu - workers_before.get(pid, 0.0)
                for pid, cpu in server.worker_cpu_seconds().items()
            ),
            reverse=True,
        )[:workers]
    assert run.statuses == {200: run.batches}, run.statuses
    assert run.items == run.batches * len(bodies)  # every item priced and stored
    return HttpResult(run, server_s, max(0.0, rest_s), used[0] / sum(used))


def http_section(result: HttpResult, workers: int) -> str:
    run, server_s, rest_s = result.run, result.server_cpu_s, result.rest_cpu_s
    latencies = sorted(run.batch_latencies_s)
    return (
        f"## Over HTTP: `uvicorn --workers {workers}`, {run.clients} clients\n\n"
        f"{run.batches} batches of {run.items // max(run.batches, 1)} items answered in "
        f"{run.wall_s:.1f} s by `uvicorn service.main:app --loop uvloop --http httptools "
        f"--workers {workers}` on a fresh SQLite file, every quote stored, {run.clients} "
        "closed-loop clients on this machine each posting the batch again as soon as its "
        "answer is in (`bench/load/batch_clients.py`):\n\n"
        "| estimates/s | batch latency median [ms] | server CPU µs per item | server CPU % "
        "| busiest worker % | client CPU % | rest of machine CPU % |\n"
        "|--:|--:|--:|--:|--:|--:|--:|\n"
        f"| **{run.items_per_s:,.0f}** | {statistics.median(latencies) * 1e3:.0f} "
        f"| {server_s / run.items * 1e6:.1f} | {100 * server_s / run.wall_s:.0f} "
        f"| {100 * result.busiest_worker_share:.0f} "
        f"| {100 * run.client_cpu_s / run.wall_s:.0f} | {100 * rest_s / run.wall_s:.0f} |\n\n"
        "CPU % are of one core (the machine has two). `busiest worker %` is the busier "
        "worker's share of the workers' CPU (50 % with two is an even split: a worker left "
        "without a client would show as 100 %). `rest of machine` is the CPU spent meanwhile "
        "on anything but the server and the clients: more than a few per cent means a "
        "neighbour shared the two cores.\n"
    )


def rate_row(label: str, count: int, samples: list[float]) -> str:
    best, median = min(samples), statistics.median(samples)
    return (
        f"| {label} | {median * 1e3:.1f} | {best * 1e3:.1f} | {count / median:,.0f} "
        f"| {count / best:,.0f} | {median / count * 1e6:.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--http-s", type=float, default=20.0, help="0 skips the HTTP depth")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--clients",
        type=int,
        default=None,
        help="concurrent batch clients (default 3 per worker: each worker gets one, whichever "
        "worker accepts which connection)",
    )
    parser.add_argument(
        "--analytical-only",
        action="store_true",
        help="price with the analytical model alone (QUOTES_USE_REGRESSOR=false): what the "
        "batch endpoint costs without the learned regressor",
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    use_regressor = not args.analytical_only
    estimator = Estimator.from_catalogues(
        regressor=EnergyRegressor.load() if use_regressor else None
    )
    bodies = items(estimator, args.items)
    requests = [EstimateRequest.model_validate(body) for body in bodies]
    resolved = [
        resolve_request(
            r, estimator.gpus, estimator.models, estimator.regions, estimator.facilities
        )
        for r in requests
    ]
    load = os.getloadavg()
    core_batched, core_single = core_calls(estimator, resolved)
    rows = [
        rate_row(
            "core: one `estimate_contexts` pass", args.items, wall_s(core_batched, args.repeat)
        ),
        rate_row("core: `estimate_request` per item", args.items, wall_s(core_single, args.repeat)),
    ]
    rows.append(
        rate_row(
            "estimator: `Estimator.price` (incl. regressor, carbon, responses)",
            args.items,
            wall_s(lambda: estimator.price(requests), args.repeat),
        )
    )
    rows.append(
        rate_row(
            "estimator: `Estimator.estimate` per item",
            args.items,
            wall_s(lambda: [estimator.estimate(r) for r in requests], args.repeat),
        )
    )
    with (
        tempfile.TemporaryDirectory() as scratch,
        endpoint_client(Path(scratch) / "q.sqlite3", use_regressor) as client,
    ):

        def post() -> None:
            response = client.post("/v1/estimate/batch", json={"items": bodies})
            assert response.status_code == 200, response.text
            # Every item stored (checked without parsing the body: that is the client's time).
            assert response.content.count(b'"quote_id":"') == len(bodies)

        endpoint = wall_s(post, args.repeat)
        rows.append(
            rate_row(
                "endpoint: `POST /v1/estimate/batch`, SQLite, in-process ASGI",
                args.items,
                endpoint,
            )
        )
        stages = stage_table(client, bodies, statistics.median(endpoint))
    http = ""
    if args.http_s > 0:
        with tempfile.TemporaryDirectory() as scratch:
            clients = args.clients or 3 * args.workers
            result = over_http(
                bodies, args.workers, clients, args.http_s, Path(scratch), use_regressor
            )
        print(
            f"over HTTP, {args.workers} workers: {result.run.items_per_s:,.0f} estimates/s, "
            f"busiest worker {100 * result.busiest_worker_share:.0f} %"
        )
        http = "\n" + http_section(result, args.workers)
    table = "\n".join(
        [
            "| depth | median per batch [ms] | best per batch [ms] | estimates/s (median) "
            "| estimates/s (best) | µs per item (median) |",
            "|---|--:|--:|--:|--:|--:|",
            *rows,
        ]
    )
    print(table)
    command = shlex.join(["python", *sys.argv])
    report = (
        "# Batch pricing throughput\n\n"
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}\n"
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs (shared), Python "
        f"{platform.python_version()}; load average before the run {load[0]:.2f}\n"
        f"- command: `{command}`\n"
        f"- {args.items} items per batch over {len(DEPLOYMENTS)} model/GPU layouts (seeded mix), "
        f"{args.repeat} timed batches per depth after one warm-up; wall-clock time; one "
        f"onnxruntime thread; target {TARGET_PER_S:,} estimates/s end to end\n"
        + (
            "- **analytical model alone** (`--analytical-only`, QUOTES_USE_REGRESSOR=false): no "
            "regressor features, no onnxruntime; energy is the roofline estimate\n\n"
            if args.analytical_only
            else "\n"
        )
        + f"{table}\n\n"
        "## Where the endpoint's time goes\n\n"
        "The endpoint's stages run one by one in the benchmark's thread with the app's own "
        "services (`QuoteService.quote` is pricing plus storing). The "
        "endpoint's time beyond parse + validate + store + serialise is HTTP, ASGI and FastAPI "
        "(TestClient's transport, request body handling, dependencies).\n\n"
        f"{stages}\n\n"
        f"{http}"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
