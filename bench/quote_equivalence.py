"""Whether a change to the pricing code left every quote as it was: documents of a fixed set
of requests written before the change, compared after it.

    python bench/quote_equivalence.py --write /tmp/quotes_before.json   # on the old code
    python bench/quote_equivalence.py --compare /tmp/quotes_before.json # on the new code

The requests: the realistic single-estimate bodies of bench/load/bodies.py (`--bodies`, seeded
as the load test seeds them), each priced alone, with the learned regressor and without, the
analytical ones verbose (per-kernel breakdown); the same bodies as continuous batches
(`serving.concurrent_sequences`) and with prefix-cache hits, alone; and bench/bench_batch.py's
1000-item batch priced in one `Estimator.price` call, with and without the regressor. Every
number of every document must agree to a relative `--rtol` (1e-9); strings, flags and nulls,
and refusals (error type and message), exactly. `created_at` (when it was priced) is left out.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_batch import items as batch_items  # noqa: E402
from load.bodies import estimate_body  # noqa: E402

from service.errors import ServiceError  # noqa: E402
from service.pricing.estimator import Estimator  # noqa: E402
from service.pricing.priced import PricedRequest  # noqa: E402
from service.pricing.regressor.runtime import (  # noqa: E402
    DEFAULT_METADATA_PATH,
    DEFAULT_MODEL_PATH,
    EnergyRegressor,
)
from service.schemas.estimate_request import EstimateRequest  # noqa: E402

SKIPPED = {"created_at"}


def outcome(result: PricedRequest | ServiceError) -> Any:
    if isinstance(result, ServiceError):
        return {"error": type(result).__name__, "message": str(result)}
    document = json.loads(result.document.text())
    return {key: value for key, value in document.items() if key not in SKIPPED}


def variants(body: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """`body` as a continuous batch among more running sequences, and with cache hits."""
    running = json.loads(json.dumps(body))
    batch = running["workload"]["batch_size"]
    running["serving"] = {"concurrent_sequences": batch * rng.choice((1, 2, 8, 32))}
    cached = json.loads(json.dumps(body))
    prompt = cached["workload"]["prompt_tokens"]
    cached["workload"]["cached_prompt_tokens"] = rng.randint(0, prompt)
    both = json.loads(json.dumps(running))
    both["workload"]["cached_prompt_tokens"] = cached["workload"]["cached_prompt_tokens"]
    return [running, cached, both]


def quotes(bodies: int, seed: int) -> dict[str, Any]:
    regressor = EnergyRegressor.load(DEFAULT_MODEL_PATH, DEFAULT_METADATA_PATH)
    learned = Estimator.from_catalogues(regressor=regressor)
    analytical = Estimator.from_catalogues(regressor=None)
    known = set(learned.models.ids)
    rng = random.Random(seed)
    singles = [estimate_body(rng, known) for _ in range(bodies)]
    extra_rng = random.Random(seed + 1)
    extras = [variant for body in singles for variant in variants(body, extra_rng)]
    out: dict[str, Any] = {}
    for name, estimator, verbose in (
        ("learned", learned, False),
        ("analytical", analytical, True),
    ):
        for i, body in enumerate(singles + extras):
            request = EstimateRequest.model_validate(body)
            (result,) = estimator.price([request], verbose=verbose)
            out[f"{name}/single/{i}"] = outcome(result)
    batch = [EstimateRequest.model_validate(body) for body in batch_items(analytical, 1000)]
    for name, estimator in (("learned", learned), ("analytical", analytical)):
        for i, result in enumerate(estimator.price(batch)):
            out[f"{name}/batch/{i}"] = outcome(result)
    return out


def differences(before: Any, after: Any, rtol: float, path: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        if before.keys() != after.keys():
            return [f"{path}: members {sorted(before)} != {sorted(after)}"]
        found: list[str] = []
        for key in before:
            found += differences(before[key], after[key], rtol, f"{path}.{key}")
        return found
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            return [f"{path}: {len(before)} items != {len(after)}"]
        found = []
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            found += differences(b, a, rtol, f"{path}[{i}]")
        return found
    numbers = (int, float)
    if (
        isinstance(before, numbers)
        and isinstance(after, numbers)
        and not isinstance(before, bool)
        and not isinstance(after, bool)
    ):
        if type(before) is not type(after):
            return [f"{path}: {before!r} ({type(before).__name__}) != {after!r}"]
        if before == after or math.isclose(before, after, rel_tol=rtol, abs_tol=0.0):
            return []
        return [f"{path}: {before!r} != {after!r}"]
    return [] if before == after else [f"{path}: {before!r} != {after!r}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bodies", type=int, default=320)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rtol", type=float, default=1e-9)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path)
    group.add_argument("--compare", type=Path)
    args = parser.parse_args()
    now = quotes(args.bodies, args.seed)
    if args.write is not None:
        args.write.write_text(json.dumps(now), encoding="utf-8")
        refused = sum("error" in value for value in now.values())
        print(f"wrote {len(now)} outcomes ({refused} refusals) to {args.write}")
        return
    before = json.loads(args.compare.read_text(encoding="utf-8"))
    if before.keys() != now.keys():
        sys.exit(f"different requests: {len(before)} before, {len(now)} now")
    found = [line for key in before for line in differences(before[key], now[key], args.rtol, key)]
    numbers = sum(_numbers(value) for value in now.values())
    for line in found[:50]:
        print(line)
    print(
        f"{len(now)} outcomes, {numbers} numbers compared at rtol {args.rtol}: "
        f"{len(found)} differences"
    )
    sys.exit(1 if found else 0)


def _numbers(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_numbers(v) for v in value.values())
    if isinstance(value, list):
        return sum(_numbers(v) for v in value)
    return int(isinstance(value, (int, float)) and not isinstance(value, bool))


if __name__ == "__main__":
    main()
