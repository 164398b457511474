"""A real `uvicorn service.main:app` worker in a subprocess, for the crash and shutdown tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

REPOSITORY = Path(__file__).resolve().parents[2]
GRACE_S = 5  # --timeout-graceful-shutdown


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def worker_settings(database_url: str, **overrides: str) -> dict[str, str]:
    """Bounded, short timeouts (so an idempotency claim stranded by a crash expires in 3 s)."""
    return {
        "QUOTES_DATABASE_URL": database_url,
        "QUOTES_RUN_MIGRATIONS_ON_START": "false",
        "QUOTES_USE_REGRESSOR": "false",
        "QUOTES_LOG_LEVEL": "WARNING",
        "QUOTES_BILLING_SETTLE_S": "0",
        "QUOTES_DB_POOL_TIMEOUT_S": "0.5",
        "QUOTES_DB_CONNECT_TIMEOUT_S": "1",
        "QUOTES_DB_STATEMENT_TIMEOUT_MS": "1000",
        "QUOTES_SQLITE_BUSY_TIMEOUT_MS": "1000",
        "QUOTES_IDEMPOTENCY_LEASE_S": "3",
        "QUOTES_API_KEY_MODE_TTL_S": "0",
        # The fault tests read back every quote they were answered, more than the default 100
        # billing reads per second once reads are fast: not what they test (rate limits have
        # tests of their own), so that scope is unlimited here.
        "QUOTES_RATE_LIMITS": '{"billing": 0}',
        **overrides,
    }


class Worker:
    """One uvicorn process on a free port: a single worker in the master process, or with
    `workers` > 1 a master and its workers in a process group of their own."""

    def __init__(self, settings: Mapping[str, str], log_path: Path, workers: int = 1) -> None:
        self.workers = workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [
            sys.executable, "-m", "uvicorn", "service.main:app",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--loop", "uvloop", "--http", "httptools", "--no-access-log",
            "--timeout-graceful-shutdown", str(GRACE_S),
            *(["--workers", str(workers)] if workers > 1 else []),
        ]  # fmt: skip
        environment = {**os.environ, "PYTHONPATH": str(REPOSITORY), **settings}
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=REPOSITORY, env=environment, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=workers > 1,  # the workers are stopped with the master
            )  # fmt: skip
        self._wait_until_up(log_path)

    def _wait_until_up(self, log_path: Path, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"uvicorn exited at start-up:\n{log_path.read_text()}")
            try:
                httpx.get(f"{self.url}/v1/health", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"uvicorn did not come up:\n{log_path.read_text()}")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        if self.workers > 1:
            _stop_group(self.process)
        elif self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the master and its workers, SIGKILL to what is left after the grace."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=GRACE_S + 15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextmanager
def running_worker(
    settings: Mapping[str, str], log_path: Path, workers: int = 1
) -> Iterator[Worker]:
    worker = Worker(settings, log_path, workers)
    try:
        yield worker
    finally:
        worker.stop()
