"""Run events as plain data for live views (WebSocket fragments, JSON clients, the page).

The thread page seeds its Activity panel with :func:`activity` (the newest events,
oldest first, and the id of the last one), then the thread's WebSocket sends what
follows (``studio.consumers``), each event rendered by ``components/_run_event.html``
from :func:`event_view`. ``stream`` events (chunks recorded for API clients' SSE)
are not activity: neither lists them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from studio.models import Run, RunEvent
from studio.presenters import ActivityView, NodeState

__all__ = (
    "ACTIVITY_LIMIT",
    "activity",
    "event_view",
    "run_display_status",
    "summarize",
)

ACTIVITY_LIMIT = 50
"""Events the thread page shows when it loads (the socket appends the rest)."""

_ACTIVE = frozenset({Run.Status.PENDING, Run.Status.RUNNING})


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
    if status == Run.Status.INTERRUPTED:
        return "cancelled"
    return str(status or "")


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
    return {
        "id": row.id,
        "kind": row.kind,
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
    }


def activity(thread_id: str, nodes: Iterable[str]) -> ActivityView:
    """The thread's newest events (oldest first) and each node's state in the active run.

    One indexed query (``thread, id``) for at most :data:`ACTIVITY_LIMIT` + 1 rows,
    however long the thread's history. Node states come from the events shown: they
    are reset when a run starts or finishes, so a finished thread shows none.
    """
    rows = list(
        RunEvent.objects.filter(thread_id=thread_id)
        .exclude(kind=RunEvent.STREAM)
        .order_by("-id")[: ACTIVITY_LIMIT + 1]
    )
    events = tuple(event_view(row) for row in reversed(rows[:ACTIVITY_LIMIT]))
    states: dict[str, str] = {}
    for event in events:
        if event["kind"] == "run.status":
            states.clear()
        elif event["node_root"]:
            states[event["node"]] = event["node_state"]
    return ActivityView(
        thread_id=thread_id,
        events=events,
        last_event_id=events[-1]["id"] if events else 0,
        older=len(rows) > ACTIVITY_LIMIT,
        nodes=tuple(NodeState(node, states.get(node, "")) for node in nodes),
    )
