"""Run events as plain data for live views (WebSocket fragments, JSON clients)."""

from __future__ import annotations

from typing import Any

from studio.models import RunEvent

__all__ = ("event_view", "summarize")


def summarize(kind: str, payload: dict[str, Any]) -> str:
    """One line a person can read."""
    node = payload.get("node", "")
    if kind == "run.status":
        error = payload.get("error") or {}
        suffix = f": {error.get('error')}: {error.get('message')}" if error else ""
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


def event_view(row: RunEvent) -> dict[str, Any]:
    """An event as JSON-ready data: id, kind, run, time, payload, and a summary line."""
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
    return {
        "id": row.id,
        "kind": row.kind,
        "run_id": row.run_id,
        "created_at": row.created_at.isoformat(),
        "payload": payload,
        "summary": summarize(row.kind, payload),
        "node": node,
        "node_state": state,
        "status": payload.get("status") if row.kind == "run.status" else None,
    }
