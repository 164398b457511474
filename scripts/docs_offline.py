"""Render the service's /docs page in headless Chromium with every host but 127.0.0.1
unresolvable (no CDN can answer), and save a screenshot of it.

    python scripts/docs_offline.py [--output docs/images/docs-offline.png]

Needs Chromium (`apt-get install chromium`). The service runs on a free port over a fresh SQLite
file; tests/deploy/test_docs_offline_render.py runs the same render and reads its DOM.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
# Chromium resolves no name but the loopback address: a page that needs the internet breaks.
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def running_service() -> Iterator[str]:
    """The service on a free port of 127.0.0.1 (a fresh SQLite file), its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as scratch:
        environment = {
            **os.environ,
            "QUOTES_DATABASE_URL": f"sqlite:///{scratch}/quotes.sqlite3",
            "QUOTES_LOG_LEVEL": "WARNING",
            "QUOTES_USE_REGRESSOR": "false",
        }
        command = [sys.executable, "-m", "uvicorn", "service.main:app", "--port", str(port)]
        process = subprocess.Popen(
            command, cwd=REPOSITORY, env=environment, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"{url}/v1/health/live", timeout=1)
                    break
                except OSError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise RuntimeError("the service did not start") from None
                    time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=20)


def render(browser: str, url: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Chromium, headless and offline, on `url` (scripts get 8 s of virtual time to run)."""
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", OFFLINE,
        "--virtual-time-budget=8000", *arguments, url,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", type=Path, default=Path("docs/images/docs-offline.png"))
    args = parser.parse_args()
    browser = chromium()
    if browser is None:
        sys.exit("Chromium is not installed (apt-get install chromium)")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with running_service() as url:
        render(browser, f"{url}/docs", "--window-size=1280,1400", f"--screenshot={args.output}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
