"""Health checks for supervisors and load balancers.

``liveness`` answers without I/O: the process is up and serving. ``readiness``
runs four checks, each in a thread of its own with a deadline, so a database
that does not answer makes ``/readyz`` fail within seconds instead of holding
a request (and a web thread) until the connection pool gives up:

- ``database``: ``SELECT 1`` on the default database;
- ``migrations``: every migration on disk is applied (the disk side is read
  once per process; the applied side on every check);
- ``channel_layer``: a message goes through the layer and back (Redis in
  scale-out, in-memory embedded);
- ``workers``: when ``STUDIO_EXPECT_WORKERS`` is on, at least one worker beat
  within ``STUDIO_WORKER_STALE_SECONDS`` (:mod:`studio.observability.heartbeats`).

A failed check is reported by name and exception type only; its full error goes
to the log (a health endpoint is unauthenticated: it must not show hosts or
credentials).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from studio.observability import heartbeats

__all__ = ("Check", "Readiness", "liveness", "readiness")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Check:
    """One check's outcome."""

    ok: bool
    detail: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "detail": self.detail,
            "ms": round(self.seconds * 1e3, 1),
        }


@dataclass(frozen=True, slots=True)
class Readiness:
    """All checks; ready when every one passed."""

    checks: dict[str, Check] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return all(check.ok for check in self.checks.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": "ready" if self.ready else "not ready",
            "checks": {name: check.as_dict() for name, check in self.checks.items()},
        }


def liveness() -> dict[str, str]:
    """The process is up (no I/O: a stuck database must not get it restarted)."""
    return {"status": "ok"}


def _in_thread(func: Callable[[], str]) -> str:
    """Run a database check and hand this thread's connection back afterwards."""
    try:
        return func()
    finally:
        connection.close()


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return f"{connection.vendor} answered"


@functools.cache
def _migrations_on_disk() -> frozenset[tuple[str, str]]:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return frozenset(loader.graph.nodes)


def _migrations() -> str:
    applied = set(MigrationRecorder(connection).applied_migrations())
    missing = sorted(_migrations_on_disk() - applied)
    if missing:
        names = ", ".join(f"{app}.{name}" for app, name in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise NotReady(f"{len(missing)} not applied: {names}{more}")
    return "all applied"


def _workers() -> str:
    max_age = float(settings.STUDIO_WORKER_STALE_SECONDS)
    alive = heartbeats.recent(max_age)
    if not alive:
        raise NotReady(f"no worker heartbeat in the last {max_age:g} s")
    return f"{alive} alive"


async def _channel_layer() -> str:
    layer = get_channel_layer()
    if layer is None:
        raise NotReady("no channel layer configured")
    channel = await layer.new_channel("readyz.")
    await layer.send(channel, {"type": "readyz.ping"})
    message = await layer.receive(channel)
    if message.get("type") != "readyz.ping":
        raise NotReady("the channel layer answered with another message")
    return "a message went through"


class NotReady(Exception):
    """A check ran and found something wrong (its message is safe to show)."""


async def _run(name: str, check: Awaitable[str], timeout: float) -> Check:
    started = time.monotonic()
    try:
        detail = await asyncio.wait_for(check, timeout)
    except NotReady as exc:
        return Check(False, str(exc), time.monotonic() - started)
    except TimeoutError:
        log.warning("readiness: %s did not answer within %g s", name, timeout)
        return Check(False, f"no answer within {timeout:g} s", timeout)
    except Exception as exc:
        log.warning("readiness: %s failed: %s", name, exc, exc_info=True)
        return Check(
            False, f"failed ({type(exc).__name__})", time.monotonic() - started
        )
    return Check(True, detail, time.monotonic() - started)


_CHECK_THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="readyz")
"""Threads of their own: a hung check must not hold the thread that runs Django's
synchronous views, and however many probes pile up, at most four threads wait."""


def _threaded(func: Callable[[], str]) -> Awaitable[str]:
    return asyncio.get_running_loop().run_in_executor(_CHECK_THREADS, _in_thread, func)


async def readiness() -> Readiness:
    """Run the checks concurrently, each bounded by ``STUDIO_READYZ_TIMEOUT`` seconds."""
    timeout = float(settings.STUDIO_READYZ_TIMEOUT)
    checks: dict[str, Awaitable[str]] = {
        "database": _threaded(_database),
        "migrations": _threaded(_migrations),
        "channel_layer": _channel_layer(),
    }
    if settings.STUDIO_EXPECT_WORKERS:
        checks["workers"] = _threaded(_workers)
    results = await asyncio.gather(
        *(_run(name, check, timeout) for name, check in checks.items())
    )
    return Readiness(dict(zip(checks, results, strict=True)))
