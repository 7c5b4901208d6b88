"""The run event log: engine events made JSON, stored in order, then published to the thread's group.

The table is the truth; the Channels layer is at-most-once. A browser that
(re)connects asks for the events after the last id it saw.

Two families share the table: the activity feed's kinds (:func:`as_record`:
``task.start``, ``task.end``, ``step``, ``checkpoint``, ``interrupt``,
``custom``, ``run.status``) and ``stream`` events, the chunks of the stream
modes an API client asked for (:class:`StreamRecorder`), which the SSE views
serve and the HTML feed never shows (``studio.services.activity`` and the thread
consumer leave them out).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from engine import events as ev
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from studio.groups import thread_group
from studio.models import Run, RunEvent
from studio.presentation.diff import plain
from studio.services.group_send import group_send

__all__ = (
    "API_STREAM_MODES",
    "STREAM",
    "EventWriter",
    "StreamRecorder",
    "append",
    "as_record",
    "engine_modes",
    "publish",
)

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


STREAM = RunEvent.STREAM
"""The kind of a stored stream chunk: ``{"event": name, "data": json}``."""

API_STREAM_MODES = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
)
"""The Agent Server stream modes the studio serves (the SDK's ``tools`` and
``lifecycle`` are not among them)."""

_ENGINE_MODE = {
    "values": "values",
    "updates": "updates",
    "messages": "messages",
    "messages-tuple": "messages",
    "custom": "custom",
    "debug": "debug",
    "tasks": "tasks",
    "checkpoints": "checkpoints",
}
_LIVE_MODES = frozenset({"custom", "messages", "messages-tuple", "events"})
"""Modes whose chunks arrive while a node runs: stored at once, not batched."""


def engine_modes(api_modes: Iterable[str]) -> tuple[str, ...]:
    """The engine's stream modes behind API modes (``events`` comes from typed events)."""
    found = {_ENGINE_MODE[m] for m in api_modes if m in _ENGINE_MODE}
    return tuple(sorted(found))


class StreamRecorder:
    """A run's engine events as the SSE events an Agent Server client asked for.

    One recorder per run execution. :meth:`records` takes every event of
    ``stream_events(..., stream_mode=engine_modes(modes))`` and returns the
    stream payloads to store, ``{"event": name, "data": json}``:

    - ``values``, ``updates``, ``custom``, ``debug``, ``tasks``, ``checkpoints``:
      the chunk as ``stream()`` yields it, made JSON; the event is the mode, or
      ``mode|<namespace>`` for a subgraph's chunk (``subgraphs=True`` only);
    - ``messages-tuple``: event ``messages``, data ``[message, metadata]``;
    - ``messages``: ``messages/metadata`` the first time a message id is seen,
      then ``messages/partial`` with the message so far (token chunks, and
      messages given as plain dicts, which do not say whether they are whole:
      their text is accumulated by id) or ``messages/complete`` (a whole
      LangChain message), data ``[message]``;
    - ``events``: LangChain-style ``on_chain_start`` / ``on_chain_end`` events
      for the run and each task, built from the typed events (no model or tool
      callbacks: the engine has none).
    """

    def __init__(self, api_modes: Iterable[str], *, subgraphs: bool) -> None:
        modes = set(api_modes)
        self.subgraphs = subgraphs
        self.tuples = "messages-tuple" in modes
        self.messages = "messages" in modes
        self.events = "events" in modes
        self.graph = ""
        self.run_id = ""
        self._seen: dict[str, Any] = {}

    def records(self, event: Any) -> list[tuple[dict[str, Any], bool]]:
        """``(payload, urgent)`` pairs for one engine event (usually none or one)."""
        if isinstance(event, ev.StreamPart):
            return [(p, event.mode in _LIVE_MODES) for p in self._part(event)]
        if self.events:
            found = self._lc_event(event)
            if found is not None:
                return [({"event": "events", "data": found}, True)]
        return []

    def _name(self, mode: str, ns: tuple[str, ...]) -> str:
        return f"{mode}|{'|'.join(ns)}" if ns and self.subgraphs else mode

    def _part(self, part: ev.StreamPart) -> Iterator[dict[str, Any]]:
        if part.mode != "messages":
            yield {"event": self._name(part.mode, part.ns), "data": plain(part.payload)}
            return
        message, metadata = part.payload
        if self.tuples:
            yield {
                "event": self._name("messages", part.ns),
                "data": [plain(message), plain(metadata)],
            }
        if self.messages:
            yield from self._message(message, metadata)

    def _message(self, message: Any, metadata: Any) -> Iterator[dict[str, Any]]:
        data = plain(message)
        if not isinstance(data, dict):
            data = {"type": "ai", "content": data}
        message_id = str(data.get("id") or "")
        if message_id and message_id not in self._seen:
            yield {
                "event": "messages/metadata",
                "data": {message_id: {"metadata": plain(metadata)}},
            }
        name = type(message).__name__
        if not isinstance(message, dict) and not name.endswith("Chunk"):
            self._seen[message_id] = data  # a whole LangChain message
            yield {"event": "messages/complete", "data": [data]}
            return
        so_far = self._seen.get(message_id)
        if isinstance(so_far, dict) and isinstance(so_far.get("content"), str):
            content = data.get("content")
            data = {
                **so_far,
                **{k: v for k, v in data.items() if v not in (None, "", [], {})},
                "content": so_far["content"]
                + (content if isinstance(content, str) else ""),
            }
        self._seen[message_id] = data
        yield {"event": "messages/partial", "data": [data]}

    def _lc_event(self, event: Any) -> dict[str, Any] | None:
        if isinstance(event, ev.RunStarted) and not event.ns:
            self.graph, self.run_id = event.graph, event.run_id or ""
            return _lc("on_chain_start", self.graph, self.run_id, [], {})
        if isinstance(event, ev.TaskStarted):
            return _lc(
                "on_chain_start",
                event.node,
                event.task_id,
                [self.run_id] if self.run_id else [],
                {},
                step=event.step,
                ns=event.ns,
            )
        if isinstance(event, ev.TaskFinished):
            data = {"output": plain(event.update)}
            if event.error:
                data = {"error": event.error}
            return _lc(
                "on_chain_end",
                event.node,
                event.task_id,
                [self.run_id] if self.run_id else [],
                data,
                step=event.step,
                ns=event.ns,
            )
        if isinstance(event, ev.RunFinished) and not event.ns:
            return _lc("on_chain_end", self.graph, self.run_id, [], {})
        return None


def _lc(
    kind: str,
    name: str,
    run_id: str,
    parents: list[str],
    data: dict[str, Any],
    *,
    step: int | None = None,
    ns: tuple[str, ...] = (),
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    tags: list[str] = []
    if step is not None:
        metadata = {
            "langgraph_step": step,
            "langgraph_node": name,
            "langgraph_checkpoint_ns": "|".join(ns),
        }
        tags = [f"graph:step:{step}"]
    return {
        "event": kind,
        "name": name,
        "run_id": run_id,
        "tags": tags,
        "metadata": metadata,
        "data": data,
        "parent_ids": parents,
    }


def append(run: Run, kind: str, payload: dict[str, Any]) -> RunEvent:
    """Store an event (first) and publish it to the thread's group (second)."""
    record = RunEvent.objects.create(
        run=run, thread_id=run.thread_id, kind=kind, payload=payload
    )
    publish(record)
    return record


def publish(record: RunEvent) -> None:
    try:
        group_send(
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

    With an ``owner`` (a worker's lease name), a batch is stored only while that
    worker still holds the run (``running``, its lease owner), checked by the
    insert itself under a lock on the run's row
    (:meth:`~studio.models.RunEventManager.create_while_held`, one statement): a
    worker stopped past its lease (a zombie) whose run another worker took over
    stores nothing more when it wakes up; :attr:`lost` says so.
    """

    def __init__(self, run: Run, owner: str = "") -> None:
        self.run = run
        self.owner = owner
        self.lost = False
        self.pending: list[RunEvent] = []
        self.oldest = 0.0

    def add(self, kind: str, payload: dict[str, Any], *, urgent: bool = False) -> None:
        """Queue an event; ``urgent`` (or an urgent kind) stores the batch at once."""
        if not self.pending:
            self.oldest = time.monotonic()
        self.pending.append(
            RunEvent(
                run=self.run, thread_id=self.run.thread_id, kind=kind, payload=payload
            )
        )
        if (
            urgent
            or kind in URGENT_KINDS
            or len(self.pending) >= FLUSH_SIZE
            or time.monotonic() - self.oldest >= FLUSH_SECONDS
        ):
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        if self.owner:
            if not RunEvent.objects.create_while_held(batch, self.run.pk, self.owner):
                if not self.lost:
                    log.warning(
                        "run %s: %s lost its lease; its events are not stored",
                        self.run.pk,
                        self.owner,
                    )
                self.lost = True
                return
            created = batch
        else:
            created = RunEvent.objects.bulk_create(batch)
        last = created[-1]
        if not last.pk:  # a backend that does not return ids: read it back
            last = RunEvent.objects.filter(run=self.run).order_by("-id").first() or last
        publish(last)
