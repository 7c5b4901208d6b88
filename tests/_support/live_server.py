"""A real Studio server for browser tests: Daphne in a subprocess on a free loopback port.

The Datasette pattern: the browser talks to the same ASGI app, process and settings
module a user runs (embedded mode), against a throwaway SQLite database.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ("TEST_GRAPHS", "LiveServer", "live_server")

REPO = Path(__file__).resolve().parents[2]
TEST_GRAPHS = {"gate": "tests._support.live_graphs:gate"}
"""Graphs the browser tests add to the demo ones (``live_server(graphs=...)``)."""
_SCALE_OUT = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DEBUG")


@dataclass(frozen=True)
class LiveServer:
    url: str
    log: Path
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The server's environment (settings), for ``manage.py`` commands on its data."""
    process: subprocess.Popen[bytes] | None = field(
        default=None, repr=False, compare=False
    )
    """The Daphne process (a test that stops it itself)."""

    def manage(self, *args: str) -> str:
        """Run ``manage.py`` on the server's databases; its output."""
        done = subprocess.run(
            [sys.executable, str(REPO / "manage.py"), *args],
            env=dict(self.env),
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout

    def create_user(self, username: str, password: str) -> None:
        self.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import User; "
            f"User.objects.create_user({username!r}, password={password!r})",
        )

    @contextmanager
    def worker_held(self, release: Path, *, user: str = "demo") -> Iterator[None]:
        """Keep the embedded worker busy until the block ends.

        Queues a run of the ``gate`` graph (:data:`TEST_GRAPHS`), which waits for
        ``release`` to exist. The worker takes runs oldest first, so a run queued
        inside the block starts only after it: a test can open that run's page
        first and watch it live. Needs ``live_server(..., graphs=TEST_GRAPHS)``.
        """
        self.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import User; "
            "from studio.services.runs import start_run; "
            f"start_run(graph='gate', user=User.objects.get(username={user!r}), "
            f"input={{'release': {str(release)!r}}})",
        )
        try:
            yield
        finally:
            release.touch()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def live_server(
    workdir: Path,
    *,
    seed: bool = True,
    graphs: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> Iterator[LiveServer]:
    """Migrate a fresh SQLite database, optionally seed it, serve it; stop on exit.

    ``graphs`` are registered besides the demo graphs (``STUDIO_GRAPHS_FILE``).
    """
    env = {key: value for key, value in os.environ.items() if key not in _SCALE_OUT}
    env |= {
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}",
        "STUDIO_CHECKPOINT_DB": str(workdir / "checkpoints.sqlite3"),
        "SECRET_KEY": "insecure-key-for-browser-tests",
        "PYTHONUNBUFFERED": "1",
    }
    if graphs:
        graphs_file = workdir / "graphs.json"
        graphs_file.write_text(json.dumps({"graphs": dict(graphs)}))
        env["STUDIO_GRAPHS_FILE"] = str(graphs_file)
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
        yield LiveServer(url=url, log=log, env=env, process=process)
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
