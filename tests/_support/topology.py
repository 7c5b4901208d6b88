"""The scale-out deployment on loopback: Postgres, Redis, N Daphne and M ``studio_worker``.

What README's "Deployment" subsection tells an operator to run, started as
subprocesses for ``tests/topology`` and ``benchmarks/studio_api.py``:

1. a fresh database on the Postgres server of ``pg_dsn`` (dropped at the end);
   ``manage.py migrate`` and ``manage.py seed_demo --no-runs`` once;
2. ``daphne -b 127.0.0.1 -p <free port> studio.asgi:application`` N times;
3. ``manage.py studio_worker --name <name> --lease-seconds <s>`` M times;

all with ``DATABASE_URL`` (the checkpointer uses the same Postgres and creates
its tables itself, on each process's first use), ``REDIS_URL`` (the Channels
layer), ``SECRET_KEY`` and ``STUDIO_EMBEDDED_WORKER=0``. Extra graphs are
registered through ``STUDIO_GRAPHS_FILE``.

Redis: the layer's keys are named after thread ids (uuid4) and random channel
names, so parallel runs of the same topology on one Redis database never
collide; other tests and benchmarks use their own prefixes (``studio-tests``,
``bench``), not the studio's ``studio``.

No pytest here: the benchmarks use it too. Every wait is bounded in time, and
every address is 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from psycopg.conninfo import conninfo_to_dict

from tests._support.live_server import free_port
from tests._support.postgres import fresh_database

__all__ = (
    "Process",
    "Topology",
    "ViewerLog",
    "database_url",
    "session_cookie",
    "topology",
    "watch_thread",
)

REPO = Path(__file__).resolve().parents[2]
_OWN = (
    "DATABASE_URL",
    "REDIS_URL",
    "DJANGO_SETTINGS_MODULE",
    "DEBUG",
    "STUDIO_EMBEDDED_WORKER",
    "STUDIO_GRAPHS_FILE",
    "SERVE_STATIC",
    "STUDIO_HTTPS",
)


def database_url(dsn: str) -> str:
    """A ``postgresql://`` URL (what ``DATABASE_URL`` takes) for a libpq DSN or URL."""
    params = conninfo_to_dict(dsn)
    user = quote(str(params.get("user") or "postgres"), safe="")
    password = params.get("password")
    auth = f"{user}:{quote(str(password), safe='')}@" if password else f"{user}@"
    host = str(params.get("host") or "127.0.0.1")
    port = str(params.get("port") or "5432")
    name = quote(str(params["dbname"]), safe="")
    return f"postgresql://{auth}{host}:{port}/{name}"


@dataclass
class Process:
    """One process of the deployment and its log (stdout and stderr)."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    url: str = ""
    """``http://127.0.0.1:<port>`` for a Daphne process."""

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, *, kill: bool = False, timeout: float = 10.0) -> None:
        """SIGKILL, or SIGTERM then SIGKILL after ``timeout`` seconds."""
        if not self.alive():
            return
        if kill:
            self.popen.send_signal(signal.SIGKILL)
        else:
            self.popen.terminate()
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=timeout)


@dataclass
class Topology:
    workdir: Path
    env: dict[str, str]
    database_dsn: str
    """libpq DSN of the deployment's database (for reading it back in checks)."""
    lease_seconds: float
    daphnes: list[Process] = field(default_factory=list)
    workers: dict[str, Process] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    """API tokens issued at start (``topology(tokens=...)``), by username."""

    @property
    def urls(self) -> list[str]:
        return [daphne.url for daphne in self.daphnes]

    def manage(self, *args: str, timeout: float = 120.0) -> str:
        """Run ``manage.py`` with the deployment's settings; its stdout."""
        done = subprocess.run(
            [sys.executable, str(REPO / "manage.py"), *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode:
            raise RuntimeError(
                f"manage.py {' '.join(args)} exited with {done.returncode}:\n"
                f"{done.stdout}\n{done.stderr}"
            )
        return done.stdout

    def token(self, username: str) -> str:
        """A new API token of ``username`` (``manage.py create_api_token``)."""
        return self.manage("create_api_token", username).strip()

    def _spawn(self, name: str, command: list[str]) -> Process:
        log = self.workdir / f"{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                command,
                env=self.env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the test does not reach them
            )
        return Process(name, popen, log)

    def start_daphne(self) -> Process:
        """One more Daphne on a free loopback port (not waited for: :meth:`wait_ready`)."""
        port = free_port()
        name = f"daphne-{len(self.daphnes) + 1}"
        process = self._spawn(
            name,
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
        )
        process.url = f"http://127.0.0.1:{port}"
        self.daphnes.append(process)
        return process

    def start_worker(self, name: str | None = None) -> Process:
        """One more ``manage.py studio_worker`` (not waited for: :meth:`wait_ready`)."""
        name = name or f"worker-{len(self.workers) + 1}"
        process = self._spawn(
            name,
            [
                sys.executable,
                str(REPO / "manage.py"),
                "studio_worker",
                "--name",
                name,
                "--lease-seconds",
                str(self.lease_seconds),
            ],
        )
        self.workers[name] = process
        return process

    def stop_workers(self, *names: str) -> None:
        """SIGTERM the named workers (they finish their run), wait, forget them."""
        stopping = [self.workers.pop(name) for name in names]
        for process in stopping:
            if process.alive():
                process.popen.terminate()
        for process in stopping:
            process.stop()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every Daphne answers its sign-in page and every worker says it waits."""
        deadline = time.monotonic() + timeout
        pending = [*self.daphnes, *self.workers.values()]
        while pending:
            for process in list(pending):
                if not process.alive():
                    raise RuntimeError(
                        f"{process.name} exited with {process.popen.returncode}:\n"
                        f"{process.tail()}"
                    )
                if _ready(process):
                    pending.remove(process)
            if not pending:
                return
            if time.monotonic() > deadline:
                names = ", ".join(p.name for p in pending)
                raise RuntimeError(
                    f"not ready within {timeout}s: {names}\n{self.diagnostics()}"
                )
            time.sleep(0.1)

    def session_cookie(self, username: str, password: str) -> str:
        return session_cookie(self.urls[0], username, password)

    def diagnostics(self, lines: int = 30) -> str:
        """The last lines of every process's log (for a failure message)."""
        parts = []
        for process in [*self.daphnes, *self.workers.values()]:
            state = "running" if process.alive() else f"exit {process.popen.returncode}"
            parts.append(f"--- {process.name} ({state}) ---\n{process.tail(lines)}")
        return "\n".join(parts)

    def stop_all(self) -> None:
        for process in [*self.workers.values(), *self.daphnes]:
            if process.alive():
                process.popen.terminate()
        for process in [*self.workers.values(), *self.daphnes]:
            process.stop()


def _ready(process: Process) -> bool:
    if process.url:
        try:
            with urllib.request.urlopen(
                f"{process.url}/accounts/login/", timeout=2
            ) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False
    try:
        return "waiting for runs" in process.log.read_text(errors="replace")
    except OSError:
        return False


@contextmanager
def topology(
    workdir: Path,
    *,
    pg_dsn: str,
    redis_url: str,
    graphs: Mapping[str, str] | None = None,
    daphnes: int = 2,
    workers: int = 2,
    lease_seconds: float = 30.0,
    extra_env: Mapping[str, str] | None = None,
    tokens: Sequence[str] = (),
    timeout: float = 60.0,
) -> Iterator[Topology]:
    """A fresh database, migrated and seeded; ``daphnes`` + ``workers`` processes.

    ``tokens``: users to issue an API token for while the processes start
    (:attr:`Topology.tokens`). Everything is stopped (SIGTERM, then SIGKILL)
    and the database dropped on exit, whatever happened.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    with fresh_database(pg_dsn) as dsn:
        env = {key: value for key, value in os.environ.items() if key not in _OWN}
        env |= {
            "DJANGO_SETTINGS_MODULE": "studio.settings",
            "DATABASE_URL": database_url(dsn),
            "REDIS_URL": redis_url,
            "SECRET_KEY": "insecure-key-for-the-topology-test",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "STUDIO_EMBEDDED_WORKER": "0",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        if graphs:
            graphs_file = workdir / "graphs.json"
            graphs_file.write_text(json.dumps({"graphs": dict(graphs)}))
            env["STUDIO_GRAPHS_FILE"] = str(graphs_file)
        deployment = Topology(
            workdir=workdir, env=env, database_dsn=dsn, lease_seconds=lease_seconds
        )
        try:
            deployment.manage("migrate", "--noinput", "-v0")
            deployment.manage("seed_demo", "--no-runs")
            for _ in range(daphnes):
                deployment.start_daphne()
            for _ in range(workers):
                deployment.start_worker()
            for username in tokens:
                deployment.tokens[username] = deployment.token(username)
            deployment.wait_ready(timeout)
            yield deployment
        finally:
            deployment.stop_all()


def session_cookie(base_url: str, username: str, password: str) -> str:
    """Sign in through ``/accounts/login/`` as a browser does; the ``sessionid``."""
    with httpx.Client(base_url=base_url, timeout=10) as client:
        page = client.get("/accounts/login/")
        page.raise_for_status()
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        if found is None:
            raise RuntimeError("the sign-in page has no CSRF token")
        done = client.post(
            "/accounts/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": found.group(1),
            },
        )
        session = client.cookies.get("sessionid")
        if done.status_code != 302 or not session:
            raise RuntimeError(f"signing in as {username} failed: {done.status_code}")
        return session


@dataclass
class ViewerLog:
    """What one WebSocket viewer received: each event frame and when (``time.time()``)."""

    url: str
    thread_id: str
    frames: list[dict[str, Any]] = field(default_factory=list)
    received: list[float] = field(default_factory=list)
    close_code: int | None = None
    close_reason: str = ""

    @property
    def ids(self) -> list[int]:
        return [int(frame["id"]) for frame in self.frames]

    @property
    def terminal(self) -> list[dict[str, Any]]:
        return [frame for frame in self.frames if frame.get("finished")]


async def watch_thread(
    url: str,
    thread_id: str,
    session: str,
    *,
    connected: asyncio.Event | None = None,
    runs: int = 1,
    timeout: float = 120.0,
    grace: float = 0.5,
) -> ViewerLog:
    """Follow ``/ws/threads/<id>/?format=json&after=0`` as a signed-in browser would.

    Reads every event frame until ``runs`` run-status frames said a run finished,
    then ``grace`` seconds more (a duplicate would show up there), or until
    ``timeout``. Sets ``connected`` once the server said hello.
    """
    from websockets.asyncio.client import connect  # noqa: PLC0415 - test-only dep
    from websockets.exceptions import ConnectionClosed  # noqa: PLC0415
    from websockets.typing import Origin  # noqa: PLC0415

    log = ViewerLog(url, thread_id)
    ws_url = url.replace("http://", "ws://", 1)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with connect(
        f"{ws_url}/ws/threads/{thread_id}/?format=json&after=0",
        origin=Origin(url),
        additional_headers={"Cookie": f"sessionid={session}"},
        open_timeout=30,
        max_size=None,
    ) as socket_:
        finished_at: float | None = None
        while True:
            limit = deadline if finished_at is None else min(deadline, finished_at)
            left = limit - loop.time()
            if left <= 0:
                break
            try:
                raw = await asyncio.wait_for(socket_.recv(), left)
            except TimeoutError:
                break
            except ConnectionClosed as closed:
                log.close_code = closed.rcvd.code if closed.rcvd else None
                log.close_reason = f"{closed!r} at {time.time()}"
                break
            message = json.loads(raw)
            if message.get("type") == "hello":
                if connected is not None:
                    connected.set()
                continue
            log.received.append(time.time())
            log.frames.append(message)
            if len(log.terminal) >= runs and finished_at is None:
                finished_at = loop.time() + grace
        with contextlib.suppress(Exception):
            await socket_.close()
    return log
