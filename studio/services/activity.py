"""The Activity feed: run events as plain data for live views (sockets, JSON clients, the page).

The thread page seeds its Activity panel with :func:`activity` (the newest events,
newest first, the last run status to pin above them, and the id of the last
event), then the thread's WebSocket sends what follows (``studio.consumers``),
each event rendered by ``components/_run_event.html`` from :func:`event_view`.
``stream`` events (chunks recorded for API clients' SSE) are not activity:
neither lists them. ``token`` events (a model's streamed text,
``studio.services.model_tokens``) go to the page's transcript, not to the Activity
list: the socket sends them (``components/_token.html``), the list leaves them
out, and the page's last event id counts them so a reconnect does not repeat
them.

**Run order.** The event log is in the order events reached the worker. With
``durability="async"`` (the engine's default) a checkpoint is saved in the
background while the next step already runs, so "checkpoint saved (step -1)"
arrives after "normalize started (step 1)". The feed shows events in the order
they happened in the run instead: :func:`in_run_order` moves each root
checkpoint event back to the end of its own step (``static/studio/threads.js``
does the same for events that arrive live). The log itself, and the ids the
socket resumes from, are unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from studio.models import Run, RunEvent
from studio.presenters import ActivityView, NodeState
from studio.services.model_tokens import TOKEN

__all__ = (
    "ACTIVITY_LIMIT",
    "activity",
    "event_view",
    "in_run_order",
    "run_display_status",
    "stream_dom_id",
    "summarize",
)

ACTIVITY_LIMIT = 50
"""Events the thread page shows when it loads (the socket appends the rest)."""

_ACTIVE = frozenset({Run.Status.PENDING, Run.Status.RUNNING})
_STEP_KINDS = frozenset({"task.start", "task.end", "step", "checkpoint"})


def summarize(kind: str, payload: dict[str, Any]) -> str:
    """One line a person can read."""
    node = payload.get("node", "")
    if kind == "run.status":
        error = payload.get("error") or {}
        suffix = f": {error.get('error')}: {error.get('message')}" if error else ""
        if payload.get("status") == Run.Status.SUCCESS and payload.get("interrupted"):
            return "run paused: waiting for input"
        return f"run {payload.get('status')}{suffix}"
    if kind == "task.start":
        return f"{node} started (step {payload.get('step')})"
    if kind == "task.end":
        if payload.get("error"):
            return f"{node} failed: {payload['error']}"
        if payload.get("interrupts"):
            return f"{node} is waiting for input"
        cached = " (cached)" if payload.get("cached") else ""
        return f"{node} finished in {payload.get('duration', 0) * 1000:.0f} ms{cached}"
    if kind == "step":
        return f"step {payload.get('step')} done"
    if kind == "checkpoint":
        return f"checkpoint saved (step {payload.get('step')})"
    if kind == "interrupt":
        return "paused: waiting for a person"
    if kind == "custom":
        return f"progress: {payload.get('payload')}"
    return kind


def run_display_status(payload: dict[str, Any]) -> str:
    """A run status in the words of the thread badge: running / interrupted / done /
    failed / cancelled (a run that ended on an ``interrupt()`` is ``interrupted``)."""
    status = payload.get("status")
    if status in _ACTIVE:
        return "running"
    if status == Run.Status.SUCCESS:
        return "interrupted" if payload.get("interrupted") else "done"
    if status in (Run.Status.ERROR, Run.Status.TIMEOUT):
        return "failed"
    if status == Run.Status.CANCELLED:
        return "cancelled"
    return str(status or "")


def stream_dom_id(message_id: str) -> str:
    """The DOM id of a message being streamed (a message id is model output: never
    put as is into an id or a selector)."""
    digest = hashlib.sha1(message_id.encode(), usedforsecurity=False).hexdigest()
    return f"stream-{digest[:16]}"


def event_view(row: RunEvent) -> dict[str, Any]:
    """An event as JSON-ready data: id, kind, run, time, payload, and a summary line.

    ``node``/``node_state`` are set for task events (``node_root``: the task ran in
    the root graph, so the page's drawing has the node); ``status``,
    ``display_status`` and ``finished`` for run status changes.
    """
    payload = dict(row.payload or {})
    node = payload.get("node") if row.kind in ("task.start", "task.end") else None
    state = None
    if row.kind == "task.start":
        state = "running"
    elif row.kind == "task.end":
        state = (
            "failed"
            if payload.get("error")
            else "interrupted"
            if payload.get("interrupts")
            else "done"
        )
    status = payload.get("status") if row.kind == "run.status" else None
    step = payload.get("step")
    token = None
    if row.kind == TOKEN:
        token = {
            "dom_id": stream_dom_id(str(payload.get("message_id", ""))),
            "delta": str(payload.get("delta", "")),
            "first": bool(payload.get("first")),
            "node": str(payload.get("node", "")),
        }
    return {
        "id": row.id,
        "kind": row.kind,
        "css_kind": row.kind.replace(".", "-"),
        "run_id": row.run_id,
        "created_at": row.created_at.isoformat(),
        "payload": payload,
        "summary": summarize(row.kind, payload),
        "node": node,
        "node_state": state,
        "node_root": node is not None and not payload.get("ns"),
        "status": status,
        "display_status": run_display_status(payload) if status else None,
        "finished": status is not None and status not in _ACTIVE,
        "token": token,
        "order_step": step
        if row.kind in _STEP_KINDS
        and isinstance(step, int)
        and not isinstance(step, bool)
        and not payload.get("ns")
        else None,
    }


def in_run_order(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events (oldest first, as stored) in the order they happened in their run.

    Every event gets ``at_step``, the root step it belongs to: its own step for
    task and step events, else the latest such step of its run before it
    (progress, interrupts and subgraph events happen inside a step). A root
    checkpoint event of step ``s`` that arrived late (an async save) then goes
    back past the events of its run that belong to later steps; it stops at its
    own step's events, at a run status change and at another run's events.
    Everything else keeps its place.
    """
    ordered: list[dict[str, Any]] = []
    current: dict[str, int | None] = {}
    for event in events:
        run = event["run_id"]
        step = event.get("order_step")
        if event["kind"] == "run.status":
            current[run] = None
        elif step is not None and event["kind"] != "checkpoint":
            previous = current.get(run)
            current[run] = step if previous is None else max(previous, step)
        event = {**event, "at_step": step if step is not None else current.get(run)}
        at = len(ordered)
        if event["kind"] == "checkpoint" and step is not None:
            while at > 0:
                before = ordered[at - 1]
                if before["run_id"] != run or before["kind"] == "run.status":
                    break
                other = before["at_step"]
                if other is None or other <= step:
                    break
                at -= 1
        ordered.insert(at, event)
    return ordered


def activity(thread_id: str, nodes: Iterable[str]) -> ActivityView:
    """The thread's newest events (newest first, in run order), its last run status
    (pinned above them) and each node's state in the active run.

    Two indexed queries (``thread, id``): at most :data:`ACTIVITY_LIMIT` + 1 rows,
    however long the thread's history, and the newest ``run.status`` row. Node
    states come from the events shown: they are reset when a run starts or
    finishes, so a finished thread shows none.
    """
    rows = list(
        RunEvent.objects.filter(thread_id=thread_id)
        .exclude(kind__in=(RunEvent.STREAM, TOKEN))
        .order_by("-id")[: ACTIVITY_LIMIT + 1]
    )
    newest_token = (
        RunEvent.objects.filter(thread_id=thread_id, kind=TOKEN)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    shown = rows[:ACTIVITY_LIMIT]
    events = in_run_order([event_view(row) for row in reversed(shown)])
    states: dict[str, str] = {}
    for event in events:
        if event["kind"] == "run.status":
            states.clear()
        elif event["node_root"]:
            states[event["node"]] = event["node_state"]
    outcome = next((row for row in shown if row.kind == "run.status"), None)
    if outcome is None and len(rows) > ACTIVITY_LIMIT:
        outcome = (
            RunEvent.objects.filter(thread_id=thread_id, kind="run.status")
            .order_by("-id")
            .first()
        )
    return ActivityView(
        thread_id=thread_id,
        events=tuple(reversed(events)),
        last_event_id=max(shown[0].id if shown else 0, newest_token or 0),
        older=len(rows) > ACTIVITY_LIMIT,
        nodes=tuple(NodeState(node, states.get(node, "")) for node in nodes),
        outcome=event_view(outcome) if outcome is not None else None,
    )
