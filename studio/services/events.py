"""Run events: engine events made JSON, stored in order, then published to the thread's group.

The table is the truth; the Channels layer is at-most-once. A browser that
(re)connects asks for the events after the last id it saw.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from engine import events as ev
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from studio.groups import thread_group
from studio.models import Run, RunEvent

__all__ = ("EventWriter", "append", "as_record", "publish")

log = logging.getLogger(__name__)
_serde = JsonPlusSerializer(lenient=True)


def jsonable(value: Any) -> Any:
    """Any engine value as plain JSON (tagged where JSON has no type for it)."""
    try:
        return _serde.encode(value)
    except Exception:  # a value the serializer refuses is shown as its repr
        return {"__t": "repr", "v": repr(value)}


def _interrupts(items: Any) -> list[dict[str, Any]]:
    return [
        {"id": getattr(i, "id", ""), "value": jsonable(getattr(i, "value", i))}
        for i in items
    ]


def as_record(event: Any) -> tuple[str, dict[str, Any]] | None:
    """``(kind, payload)`` for an engine event worth keeping, else None."""
    ns = list(getattr(event, "ns", ()))
    if isinstance(event, ev.TaskStarted):
        return "task.start", {
            "task_id": event.task_id,
            "node": event.node,
            "step": event.step,
            "ns": ns,
            "ts": event.ts,
        }
    if isinstance(event, ev.TaskFinished):
        return "task.end", {
            "task_id": event.task_id,
            "node": event.node,
            "step": event.step,
            "ns": ns,
            "started": event.started,
            "finished": event.finished,
            "duration": event.duration,
            "error": event.error,
            "interrupts": _interrupts(event.interrupts),
            "cached": event.cached,
            "update": jsonable(event.update),
        }
    if isinstance(event, ev.StepFinished):
        return "step", {
            "step": event.step,
            "ns": ns,
            "checkpoint_id": event.checkpoint_id,
            "started": event.started,
            "finished": event.finished,
            "waits": dict(event.waits),
        }
    if isinstance(event, ev.CheckpointSaved):
        return "checkpoint", {
            "checkpoint_id": event.checkpoint_id,
            "step": event.step,
            "ns": ns,
            "seconds": event.seconds,
        }
    if isinstance(event, ev.Interrupted):
        return "interrupt", {"ns": ns, "interrupts": _interrupts(event.interrupts)}
    if isinstance(event, ev.Custom):
        return "custom", {"ns": ns, "payload": jsonable(event.payload)}
    return None


def append(run: Run, kind: str, payload: dict[str, Any]) -> RunEvent:
    """Store an event (first) and publish it to the thread's group (second)."""
    record = RunEvent.objects.create(
        run=run, thread_id=run.thread_id, kind=kind, payload=payload
    )
    publish(record)
    return record


def publish(record: RunEvent) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            thread_group(record.thread_id),
            {
                "type": "run.event",
                "event_id": record.id,
                "kind": record.kind,
                "run_id": record.run_id,
            },
        )
    except Exception:  # the table is the truth; a lost publish is caught up later
        log.warning("could not publish event %s", record.id, exc_info=True)


URGENT_KINDS = frozenset({"interrupt", "run.status", "task.start", "custom"})
"""Kinds that may be followed by a long wait (a node starts or reports progress): they
go out at once, with whatever waits before them."""
FLUSH_SECONDS = 0.025
FLUSH_SIZE = 64


class EventWriter:
    """Appends a run's events in small batches: one INSERT and one publish per batch.

    Events that end a task or a step wait for the next event (never longer than
    ``FLUSH_SECONDS`` once another arrives); events after which the run may wait
    long (a task starting, progress, an interrupt, a status change) go out at once
    with everything before them. A fast run does not pay a round trip per event,
    and the browser still sees every event in order: the consumer catches up from the table on
    each notification, so one notification per batch (its last id) is enough.
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.pending: list[RunEvent] = []
        self.oldest = 0.0

    def add(self, kind: str, payload: dict[str, Any]) -> None:
        if not self.pending:
            self.oldest = time.monotonic()
        self.pending.append(
            RunEvent(
                run=self.run, thread_id=self.run.thread_id, kind=kind, payload=payload
            )
        )
        if (
            kind in URGENT_KINDS
            or len(self.pending) >= FLUSH_SIZE
            or time.monotonic() - self.oldest >= FLUSH_SECONDS
        ):
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        created = RunEvent.objects.bulk_create(batch)
        last = created[-1]
        if last.id is None:  # a backend that does not return ids: read it back
            last = RunEvent.objects.filter(run=self.run).order_by("-id").first() or last
        publish(last)
