"""A real `uvicorn service.main:app` in a subprocess, and the CPU time its processes used."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


SERVICE_APP = "service.main:app"


def uvicorn_command(port: int, workers: int, app: str = SERVICE_APP) -> list[str]:
    return [
        sys.executable, "-m", "uvicorn", app,
        "--host", "127.0.0.1", "--port", str(port),
        "--loop", "uvloop", "--http", "httptools",
        "--workers", str(workers), "--no-access-log", "--log-level", "warning",
        "--timeout-graceful-shutdown", "10",
    ]  # fmt: skip


def process_tree(root_pid: int) -> list[int]:
    """`root_pid` and its children (uvicorn's master and its worker processes)."""
    children = Path(f"/proc/{root_pid}/task/{root_pid}/children")
    try:
        return [root_pid, *(int(pid) for pid in children.read_text().split())]
    except FileNotFoundError:
        return [root_pid]


def cpu_seconds(pids: list[int], *, with_reaped_children: bool = False) -> float:
    """User + system CPU time [s] of the given processes (from /proc/<pid>/stat); with
    `with_reaped_children`, also that of their children which have exited and been waited for
    (cutime, cstime) whose parent is not itself in `pids` (else it would count twice)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
        if with_reaped_children and int(fields[1]) not in pids:  # ppid (field 4)
            total += int(fields[13]) + int(fields[14])  # cutime, cstime (fields 16, 17)
    return total / CLOCK_TICKS_PER_S


def processes_named(name: str) -> list[int]:
    """The processes whose command name is `name` (from /proc/<pid>/comm), e.g. "postgres":
    PostgreSQL's server and its backends."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError):
                continue
    return found


def machine_busy_cpu_s() -> float:
    """CPU time [s] every core of the machine has spent busy since boot (from /proc/stat:
    user, nice, system, irq, softirq and steal; idle and iowait left out)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS_PER_S


def rss_bytes(pid: int) -> int:
    """Resident set size [bytes] of one process (from /proc/<pid>/statm)."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES


@dataclass
class RunningServer:
    process: subprocess.Popen[bytes]
    port: int

    @property
    def pids(self) -> list[int]:
        return process_tree(self.process.pid)

    @property
    def worker_pids(self) -> list[int]:
        pids = self.pids
        return pids[1:] or pids  # one worker runs in the master process itself

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pids)

    def worker_cpu_seconds(self) -> dict[int, float]:
        """CPU time [s] of each process under the master (workers, and multiprocessing's
        resource tracker, which hardly runs)."""
        return {pid: cpu_seconds([pid]) for pid in self.worker_pids}


def wait_until_up(port: int, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {process.returncode} at start-up")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("uvicorn did not answer /v1/health in time")


def migrated_server_env(database_url: str, **extra: str) -> dict[str, str]:
    """Migrate `database_url` to head and return the settings a benchmark server runs with:
    that database, no migration at start-up (several workers would race to run it), warnings
    only, the Docker image's malloc arena limit (the service as it ships), and `extra`."""
    from service.db import migrate  # the service's own package, importable from the bench

    migrate.upgrade(database_url)
    return {
        "QUOTES_DATABASE_URL": database_url,
        "QUOTES_RUN_MIGRATIONS_ON_START": "false",
        "QUOTES_LOG_LEVEL": "WARNING",
        "MALLOC_ARENA_MAX": "2",  # as the Dockerfile sets it
        **extra,
    }


@contextmanager
def uvicorn_server(
    env: Mapping[str, str], workers: int, log_path: Path, app: str = SERVICE_APP
) -> Iterator[RunningServer]:
    """Start uvicorn serving `app` (the service by default) with `env` (QUOTES_* settings) and
    stop it with SIGTERM afterwards."""
    port = free_port()
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY), **env}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            uvicorn_command(port, workers, app), cwd=REPOSITORY, env=environment,
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_until_up(port, process)
        if workers > 1:  # every worker has loaded its model before the clock starts
            deadline = time.monotonic() + 60
            while len(process_tree(process.pid)) < workers + 1 and time.monotonic() < deadline:
                time.sleep(0.2)
        yield RunningServer(process, port)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
