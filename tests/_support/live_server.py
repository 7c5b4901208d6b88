"""A real Studio server for browser tests: Daphne in a subprocess on a free loopback port.

The Datasette pattern: the browser talks to the same ASGI app, process and settings
module a user runs (embedded mode), against a throwaway SQLite database.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ("LiveServer", "live_server")

REPO = Path(__file__).resolve().parents[2]
_SCALE_OUT = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DEBUG")


@dataclass(frozen=True)
class LiveServer:
    url: str
    log: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def live_server(
    workdir: Path, *, seed: bool = True, timeout: float = 30.0
) -> Iterator[LiveServer]:
    """Migrate a fresh SQLite database, optionally seed it, serve it; stop on exit."""
    env = {key: value for key, value in os.environ.items() if key not in _SCALE_OUT}
    env |= {
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}",
        "STUDIO_CHECKPOINT_DB": str(workdir / "checkpoints.sqlite3"),
        "SECRET_KEY": "insecure-key-for-browser-tests",
        "PYTHONUNBUFFERED": "1",
    }
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run(
        [*manage, "migrate", "--noinput", "-v0"], env=env, cwd=REPO, check=True
    )
    if seed:
        subprocess.run(
            [*manage, "seed_demo"],
            env=env,
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
        )

    port = free_port()
    log = workdir / "daphne.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "studio.asgi:application",
            ],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(url, process, log, timeout)
        yield LiveServer(url=url, log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_serving(
    url: str, process: subprocess.Popen[bytes], log: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"Daphne exited with {process.returncode}:\n{log.read_text()}"
            )
        try:
            with urllib.request.urlopen(f"{url}/", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    raise RuntimeError(
        f"Daphne did not serve {url} within {timeout}s:\n{log.read_text()}"
    )
