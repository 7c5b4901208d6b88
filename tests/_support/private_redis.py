"""A throwaway Redis server of a test's own, to stop and start at will.

The shared server (``TEST_REDIS_URL``) serves every other test at the same time,
so a test that needs Redis to go away runs this instead: ``redis-server`` on a
free loopback port, no persistence, in a temporary folder. :meth:`PrivateRedis.stop`
kills it (SIGTERM, as a supervisor stops it); :meth:`PrivateRedis.start` starts
a new one on the same port, empty, as a restarted cache without persistence is.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests._support.live_server import free_port
from tests._support.services import unavailable

__all__ = ("PrivateRedis", "private_redis")


@dataclass
class PrivateRedis:
    binary: str
    workdir: Path
    port: int
    process: subprocess.Popen[bytes] | None = field(default=None)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30.0) -> None:
        log = (self.workdir / "redis.log").open("ab")
        with log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.workdir),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.RedisError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self, timeout: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@contextmanager
def private_redis() -> Iterator[PrivateRedis]:
    """Start ``redis-server`` on a free port; stop it and delete its folder on exit."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server is not installed")
    workdir = Path(tempfile.mkdtemp(prefix="private-redis-"))
    server = PrivateRedis(binary, workdir, free_port())
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
