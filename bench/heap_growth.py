"""Does the quote path keep Python objects alive? tracemalloc across thousands of quotes.

    python bench/heap_growth.py [--quotes 4000]

Prices and stores quotes in process (QuoteService, SQLite in a temp dir, learned regressor on,
400 distinct request bodies), snapshots the Python heap after a warm-up and again after
`--quotes` more, and prints the net growth and its largest sources. The soak
(`bench/soak.py`) measures the whole worker's RSS, which also holds what Python does not
allocate itself (SQLite page cache, onnxruntime arenas, allocator fragmentation); this tells
the two apart.
"""

from __future__ import annotations

import argparse
import gc
import logging
import random
import tempfile
import tracemalloc
from pathlib import Path

from service.auth import DEV_PRINCIPAL
from service.config import Settings
from service.db import migrate
from service.main import build_services
from service.metrics import Metrics
from service.schemas.estimate_request import EstimateRequest

DISTINCT_BODIES = 400


def request_bodies(seed: int = 1) -> list[EstimateRequest]:
    """Llama-3.1-8B on one H100 with varied batch and prompt, each with its own request id."""
    rng = random.Random(seed)
    return [
        EstimateRequest.model_validate(
            {
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "workload": {
                    "batch_size": rng.choice([1, 2, 4, 8, 16]),
                    "prompt_tokens": rng.randint(50, 3000),
                    "output_tokens": rng.randint(16, 512),
                },
                "hardware": {"gpu": "H100-SXM5-80GB", "count": 1},
                "datacenter": {"region": "US-CA"},
                "metadata": {"request_id": f"gw-{i}"},
            }
        )
        for i in range(DISTINCT_BODIES)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quotes", type=int, default=4000)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=f"sqlite:///{Path(tmp) / 'quotes.sqlite3'}")
        migrate.upgrade(settings.database_url)
        quotes = build_services(settings, Metrics()).quotes
        bodies = request_bodies()

        def quote_many(count: int) -> None:
            for i in range(count):
                body = bodies[i % DISTINCT_BODIES]
                quotes.quote(body, principal=DEV_PRINCIPAL, idempotency_key=None, verbose=False)

        quote_many(2000)  # warm caches: plans, features, calibrations, SQLAlchemy statements
        gc.collect()
        tracemalloc.start(8)
        quote_many(1000)
        gc.collect()
        before = tracemalloc.take_snapshot()
        quote_many(args.quotes)
        gc.collect()
        growth = tracemalloc.take_snapshot().compare_to(before, "lineno")
    total_kib = sum(stat.size_diff for stat in growth) / 1024
    print(f"Python heap growth over {args.quotes} quotes: {total_kib:+.1f} KiB")
    for stat in growth[:5]:
        kib, blocks = stat.size_diff / 1024, stat.count_diff
        print(f"  {kib:+8.1f} KiB  {blocks:+6d} blocks  {stat.traceback}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
