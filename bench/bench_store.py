"""Time of one group commit of quotes: `QuoteStore.save` of 1 to 50 real quote rows at once.

    python bench/bench_store.py --database-url URL [--groups 1,5,20,50] [--repeat 20]
        [--output bench/results/store.md]

The quote writer stores every request waiting at a moment in one transaction, so its cost per
quote at a given group size bounds what one worker can store per second. Rows are those the hot
path builds (`_quote_row` of priced, seeded requests): each stores its document without the
carbon factors (migration 0005; the report gives the stored size), the factor sets being stored
by the first transaction that names them and remembered by the store after it, as in a running
worker. The database is migrated first; the rows written stay (tenant `bench-store`), so point
it at a scratch database. Results go to bench/results/store.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_batch import items  # noqa: E402
from report_file import opening, write_report  # noqa: E402

from service.config import Settings  # noqa: E402
from service.db import migrate  # noqa: E402
from service.db.engine import Database  # noqa: E402
from service.db.quote_store import QuoteStore  # noqa: E402
from service.pricing.estimator import Estimator  # noqa: E402
from service.ids import new_quote_id  # noqa: E402
from service.quoting import _Priced, _quote_row, request_fingerprint  # noqa: E402
from service.regressor.runtime import EnergyRegressor  # noqa: E402
from service.schemas.estimate_request import EstimateRequest  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "store.md"
TENANT = "bench-store"
DISTINCT_QUOTES = 50


def priced_quotes() -> list[_Priced]:
    """DISTINCT_QUOTES priced requests of the batch benchmark's seeded mix."""
    estimator = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    requests = [EstimateRequest.model_validate(body) for body in items(estimator, DISTINCT_QUOTES)]
    return [_Priced(r, request_fingerprint(r, False), estimator.estimate(r)) for r in requests]


def group_ms(store: QuoteStore, priced: list[_Priced], size: int, repeat: int) -> float:
    """Median wall-clock time [ms] of saving `size` new quote rows in one transaction."""
    store.save([_quote_row(priced[0], new_quote_id(), TENANT, None)])  # warm the pool
    samples = []
    for _ in range(repeat):
        rows = [
            _quote_row(priced[i % len(priced)], new_quote_id(), TENANT, None) for i in range(size)
        ]
        start = time.perf_counter()
        store.save(rows)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--groups", default="1,5,20,50", help="group sizes, CSV")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    sizes = [int(size) for size in args.groups.split(",")]
    migrate.upgrade(args.database_url)
    database = Database(Settings(database_url=args.database_url))
    store = QuoteStore(database)
    priced = priced_quotes()
    stored_bytes = statistics.mean(
        len(_quote_row(p, new_quote_id(), TENANT, None).response.stored_text())  # type: ignore[union-attr]
        for p in priced
    )
    backend = database.engine.dialect.name
    rows = []
    try:
        for size in sizes:
            median_ms = group_ms(store, priced, size, args.repeat)
            print(f"[{backend}] group of {size}: {median_ms:.2f} ms", flush=True)
            rows.append(f"| {backend} | {size} | {median_ms:.2f} | {median_ms / size * 1e3:.0f} |")
    finally:
        database.dispose()
    report = (
        opening(
            "Group commit of quotes (`QuoteStore.save`)",
            hidden={"$DATABASE_URL": args.database_url},  # the URL may carry a password
        )
        + f"- {DISTINCT_QUOTES} distinct priced quotes reused in turn, each row's document "
        f"{stored_bytes:,.0f} bytes on average as stored (without its carbon factors); median of "
        f"{args.repeat} transactions per group size, wall-clock, after one warm-up\n\n"
        "| database | quotes per transaction | median ms | µs per quote |\n"
        "|---|--:|--:|--:|\n" + "\n".join(rows) + "\n"
    )
    write_report(args.output, report)


if __name__ == "__main__":
    main()
