"""Worker heartbeats: each worker process touches its row every few seconds.

A run's lease proves its worker alive only while it runs something; this row
proves it while it waits too, which is what ``/readyz`` asks ("is anyone there
to run what is queued?"). A stopping worker deletes its row; a dead one leaves
it to age past ``STUDIO_WORKER_STALE_SECONDS``.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from django.db import close_old_connections
from django.utils import timezone

from studio.models import WorkerHeartbeat

__all__ = ("HeartbeatThread", "beat", "forget", "recent")

log = logging.getLogger(__name__)


def beat(name: str) -> None:
    """Say that worker ``name`` is alive now."""
    now = timezone.now()
    updated = WorkerHeartbeat.objects.filter(pk=name).update(seen_at=now)
    if not updated:
        WorkerHeartbeat.objects.update_or_create(
            pk=name, defaults={"seen_at": now}, create_defaults={"started_at": now}
        )


def forget(name: str) -> None:
    """Worker ``name`` stopped on purpose: drop its row."""
    WorkerHeartbeat.objects.filter(pk=name).delete()


def recent(max_age: float) -> int:
    """How many workers beat within the last ``max_age`` seconds."""
    since = timezone.now() - timedelta(seconds=max_age)
    return WorkerHeartbeat.objects.filter(seen_at__gte=since).count()


class HeartbeatThread:
    """Beats for worker ``name`` every ``interval`` seconds on a daemon thread."""

    def __init__(self, name: str, interval: float) -> None:
        self.name = name
        self.interval = interval
        self.done = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name=f"worker-heartbeat-{name[:24]}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Stop beating and delete the row (a clean stop is not a death)."""
        self.done.set()
        self.thread.join(timeout=5)
        try:
            forget(self.name)
        except Exception:  # the database may be the reason we stop
            log.warning("worker %s: could not delete its heartbeat", self.name)

    def _run(self) -> None:
        try:
            while True:
                try:
                    beat(self.name)
                except Exception:  # a database blip: the next beat tries again
                    log.warning("worker %s: heartbeat failed", self.name, exc_info=True)
                    close_old_connections()
                if self.done.wait(self.interval):
                    return
        finally:
            close_old_connections()
