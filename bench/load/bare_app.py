"""The bare FastAPI app bench/throughput.py measures the service against: the same request bodies,
validated by the service's own pydantic model, answered with a fixed document of a real answer's
size, and nothing else (no pricing, no storage, no auth, no middleware).

    BARE_ESTIMATE_DOC=PATH BARE_BATCH_DOC=PATH PYTHONPATH=.:bench \\
        uvicorn load.bare_app:app --workers 2 --loop uvloop --http httptools

`BARE_ESTIMATE_DOC` holds the bytes of a real `POST /v1/estimate` answer and `BARE_BATCH_DOC`
those of a real 1000-item `POST /v1/estimate/batch` answer (bench/throughput.py captures them
from the service at start-up); without them each route answers a padded document of
`BARE_ESTIMATE_BYTES` / `BARE_BATCH_BYTES` bytes (default 2,000 / 2,000,000). `BARE_REQUEST_MODEL`
("module:Class") names the request model when neither of the paths it is looked up at exists.

Routes are `async def`: the cheapest way FastAPI answers (no thread-pool hop), so the baseline is
the framework's best case, not a handicapped one.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Response
from pydantic import BaseModel

# Where the service's request model lives now, and where a refactor may move it.
REQUEST_MODEL_PATHS = (
    "service.schemas.estimate_request:EstimateRequest",
    "service.schemas.estimate_request:EstimateRequest",
)


def request_model() -> type[BaseModel]:
    """The service's own `EstimateRequest`, from the first of the known paths that imports."""
    override = os.environ.get("BARE_REQUEST_MODEL")
    paths = ((override,) if override else ()) + REQUEST_MODEL_PATHS
    failures = []
    for path in paths:
        module_name, _, name = path.partition(":")
        try:
            model = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError) as error:
            failures.append(f"{path}: {error}")
            continue
        if isinstance(model, type) and issubclass(model, BaseModel):
            return model
        failures.append(f"{path}: not a pydantic model")
    raise ImportError(
        "the service's request model was not found (set BARE_REQUEST_MODEL=module:Class): "
        + "; ".join(failures)
    )


def document(path_variable: str, size_variable: str, default_size: int) -> bytes:
    """The bytes of the file `path_variable` names, else a JSON object padded to the size
    `size_variable` gives."""
    path = os.environ.get(path_variable)
    if path:
        return Path(path).read_bytes()
    size = int(os.environ.get(size_variable, default_size))
    skeleton = json.dumps({"quote_id": "q_bare", "padding": ""}, separators=(",", ":"))
    padding = max(0, size - len(skeleton))
    return json.dumps(
        {"quote_id": "q_bare", "padding": "x" * padding}, separators=(",", ":")
    ).encode()


EstimateRequest: Any = request_model()
ESTIMATE_DOC = document("BARE_ESTIMATE_DOC", "BARE_ESTIMATE_BYTES", 2_000)
BATCH_DOC = document("BARE_BATCH_DOC", "BARE_BATCH_BYTES", 2_000_000)


class BatchRequest(BaseModel):
    items: list[EstimateRequest]  # every item validated, as the service does one by one


app = FastAPI(title="bare baseline", openapi_url=None, docs_url=None, redoc_url=None)


@app.get("/v1/health")
async def health() -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


@app.post("/v1/estimate")
async def estimate(body: EstimateRequest) -> Response:
    return Response(ESTIMATE_DOC, media_type="application/json")


@app.post("/v1/estimate/batch")
async def estimate_batch(body: BatchRequest) -> Response:
    return Response(BATCH_DOC, media_type="application/json")
