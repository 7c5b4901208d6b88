"""A throwaway PostgreSQL server of a test's own, to stop and start at will.

The shared server (``ENGINE_TEST_PG_DSN``) serves every other test at the same
time, so a test that needs Postgres to go away runs this instead: ``initdb`` in
a temporary folder, ``pg_ctl`` on a free loopback port, trust authentication,
no fsync. Run as root, the server's commands run as the ``postgres`` account
(PostgreSQL refuses root). The binaries come from Debian's ``postgresql``
package (``/usr/lib/postgresql/<version>/bin``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests._support.live_server import free_port
from tests._support.services import unavailable

__all__ = ("PrivatePostgres", "private_postgres")


def _bin_dir() -> Path:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if not found:
        unavailable("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    return Path(found[-1]).parent


@dataclass
class PrivatePostgres:
    bin_dir: Path
    data: Path
    port: int
    log: Path

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            raise RuntimeError(
                f"{args[0]} exited with {done.returncode}: {done.stdout}{done.stderr}\n"
                f"{self.log.read_text(errors='replace') if self.log.exists() else ''}"
            )

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off -k {self.data}"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
        self.wait_until_up()

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def wait_until_up(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """Initialise and start a server in a new temporary folder; stop it and delete
    the folder on exit. (Not under pytest's ``tmp_path``: that is private to the
    user running the tests, and the server may run as another.)"""
    bin_dir = _bin_dir()
    workdir = Path(tempfile.mkdtemp(prefix="private-postgres-"))
    data = workdir / "pgdata"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(workdir, "postgres")
        shutil.chown(data, "postgres")
    server = PrivatePostgres(bin_dir, data, free_port(), workdir / "postgres.log")
    server._run(
        "initdb",
        "-D",
        str(data),
        "-U",
        "postgres",
        "--auth=trust",
        "--no-sync",
        "-E",
        "UTF8",
    )
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(RuntimeError):  # already stopped
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
