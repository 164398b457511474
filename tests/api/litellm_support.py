"""Servers for the LiteLLM callback tests, each on a free localhost port: the quote service
(uvicorn in a thread, over a migrated database), a small OpenAI-compatible upstream that
reports the GPU energy it "measured" in a header, and a real `litellm` proxy process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from api_support import make_settings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from service.main import create_app

UPSTREAM_ENERGY_J = 42.5
"""What the upstream says each completion cost [J] (header `x-gpu-energy-j`)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """`app` served by uvicorn in a thread; yields its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def quote_service(database_url: str) -> Iterator[str]:
    with serving(create_app(make_settings(database_url))) as url:
        yield url


async def chat_completion(request: Request) -> JSONResponse:
    """An OpenAI chat completion of fixed text; usage counts what was asked."""
    body = await request.json()
    answer = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_764_000_000,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Paris."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14},
    }
    return JSONResponse(answer, headers={"x-gpu-energy-j": str(UPSTREAM_ENERGY_J)})


def upstream() -> Starlette:
    return Starlette(routes=[Route("/v1/chat/completions", chat_completion, methods=["POST"])])


@contextmanager
def litellm_proxy(config: Path, env: dict[str, str], log: Path) -> Iterator[str]:
    """`litellm --config config` in a subprocess (the proxy as operators run it)."""
    port = free_port()
    command = [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(config)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    with log.open("w") as out:
        process = subprocess.Popen(
            command, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"litellm exited at start-up:\n{log.read_text()[-4000:]}")
            try:
                if httpx.get(f"{url}/health/liveliness", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"litellm did not come up:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
