"""Prometheus metrics: what the processes count, and what ``/metrics`` adds from the database.

Counters and histograms are recorded where things happen: the web process counts
queued runs and open WebSocket/SSE connections, workers count runs, tasks,
steps, checkpoint saves and leases taken over. With several processes (Daphnes
and ``studio_worker`` on one machine) set ``PROMETHEUS_MULTIPROC_DIR`` to one
empty folder for all of them, before they start: each process then writes its
samples there and ``/metrics`` adds them up (``prometheus_client``'s
multiprocess mode). Without it, ``/metrics`` shows the serving process only.

Gauges that are facts about the queue (runs pending and running, interrupts
waiting for review and the oldest one's age) are read from the database at
scrape time, so every web process answers the same and none keeps state.

``/metrics`` is refused unless configured: ``STUDIO_METRICS_TOKEN`` (sent as
``Authorization: Bearer <token>``) and/or ``STUDIO_METRICS_ALLOW`` (client
addresses or networks, ``10.0.0.0/8,127.0.0.1``). Nothing configured: 404.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

__all__ = (
    "CONTENT_TYPE_LATEST",
    "Access",
    "CountingSerializer",
    "access",
    "exposition",
    "process_stopped",
)

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
_LONG = (0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600)

RUNS_QUEUED = Counter("studio_runs_queued", "Runs queued.", ["graph"])
RUNS_STARTED = Counter(
    "studio_runs_started", "Run attempts a worker started.", ["graph"]
)
RUNS_FINISHED = Counter(
    "studio_runs_finished", "Run attempts that ended, by status.", ["graph", "status"]
)
QUEUE_WAIT = Histogram(
    "studio_run_queue_wait_seconds",
    "From due (queued, or after_seconds later) to a worker's claim.",
    ["graph"],
    buckets=_LONG,
)
RUN_DURATION = Histogram(
    "studio_run_duration_seconds",
    "One attempt of a run, claim to end.",
    ["graph", "status"],
    buckets=_LONG,
)
STEP_DURATION = Histogram(
    "studio_step_duration_seconds",
    "A super-step: first task start to the barrier.",
    ["graph"],
    buckets=_SECONDS,
)
TASK_DURATION = Histogram(
    "studio_task_duration_seconds",
    "A task, all attempts included.",
    ["graph", "node"],
    buckets=_SECONDS,
)
TASKS_FINISHED = Counter(
    "studio_tasks_finished",
    "Tasks that ended: ok, error, interrupt or cached.",
    ["graph", "node", "outcome"],
)
CHECKPOINT_SAVE = Histogram(
    "studio_checkpoint_save_seconds",
    "Saving one checkpoint.",
    ["graph"],
    buckets=_SECONDS,
)
CHECKPOINT_BYTES = Counter(
    "studio_checkpoint_bytes_written",
    "Serialized bytes handed to the checkpointer (checkpoints and task writes).",
)
LEASES_TAKEN_OVER = Counter(
    "studio_worker_leases_taken_over",
    "Runs whose worker stopped heartbeating, queued again by another worker.",
)
CONNECTIONS = Gauge(
    "studio_open_connections",
    "Open WebSocket and SSE connections.",
    ["kind"],
    multiprocess_mode="livesum",
)


def _multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def process_stopped() -> None:
    """A process leaves: its live gauges (open connections) stop counting."""
    if _multiprocess():
        mark_process_dead(os.getpid())


class CountingSerializer:
    """Wraps a checkpointer's serializer and counts the bytes it produces.

    Everything a saver stores goes through ``dumps_typed``; the rest of the
    serializer's interface is passed through unchanged.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        tag, data = self._inner.dumps_typed(obj)
        CHECKPOINT_BYTES.inc(len(data))
        return tag, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self._inner.loads_typed(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


_SCRAPE_TIME: list[Collector] = []
"""Collectors read at each scrape, added by :func:`add_scrape_collector` (the queue
gauges: ``studio.observability.queue_gauges``, added when the app is ready). This
module imports no service, so services may count into its instruments."""


def add_scrape_collector(collector: Collector) -> None:
    """Read ``collector`` at every scrape (once per collector class)."""
    if not any(type(c) is type(collector) for c in _SCRAPE_TIME):
        _SCRAPE_TIME.append(collector)


class _ThisProcess(Collector):
    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def exposition() -> bytes:
    """The text format for one scrape: every process's samples plus the queue gauges."""
    registry = CollectorRegistry(auto_describe=False)
    if _multiprocess():
        MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    for collector in _SCRAPE_TIME:
        registry.register(collector)
    return generate_latest(registry)


class Access:
    """The answer to "may this request read /metrics?": an HTTP status, 200 if so."""

    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason


def _networks(entries: Iterable[str]) -> list[Any]:
    return [ipaddress.ip_network(entry.strip(), strict=False) for entry in entries]


def access(authorization: str, remote_addr: str) -> Access:
    """Check a scrape's ``Authorization`` header and client address against settings."""
    token = str(getattr(settings, "STUDIO_METRICS_TOKEN", "") or "")
    allowed = list(getattr(settings, "STUDIO_METRICS_ALLOW", []) or [])
    if not token and not allowed:
        return Access(404, "metrics are off: set STUDIO_METRICS_TOKEN or _ALLOW")
    if token:
        scheme, _, sent = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            sent.strip().encode(), token.encode()
        ):
            return Access(200, "token")
    if allowed and remote_addr:
        try:
            address = ipaddress.ip_address(remote_addr)
        except ValueError:
            address = None
        if address is not None and any(address in net for net in _networks(allowed)):
            return Access(200, "address")
    return Access(401 if token else 403, "not allowed")
