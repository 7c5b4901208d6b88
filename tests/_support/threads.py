"""Helpers for the thread page tests: run real graphs through the queue and a worker."""

from __future__ import annotations

from typing import Any

from studio.models import Run
from studio.services import runs
from studio.services.registered_graphs import runnable
from studio.services.worker import Worker

__all__ = ("GRAPHS", "XSS", "checkpoints", "drain", "run_now")

GRAPHS = {
    "purchase": "studio.demo_graphs.purchase:build",
    "open_purchase": "tests.studio.ungoverned_graphs:purchase",
    "research": "studio.demo_graphs.research:build",
    "notes": "tests.studio.thread_graphs_for_tests:notes",
    "ledger": "tests.studio.thread_graphs_for_tests:ledger",
    "broken": "tests.studio.thread_graphs_for_tests:broken",
}
XSS = "<script>alert(1)</script>"


def drain() -> int:
    """Run every queued run now, in this thread; how many ran."""
    worker = Worker(name="test-worker")
    count = 0
    while worker.run_once():
        count += 1
    return count


def run_now(user: Any, graph: str, input: Any = None, **options: Any) -> Run:
    """Queue a run and execute it (and anything queued before it)."""
    run = runs.start_run(graph=graph, user=user, input=input, **options)
    drain()
    run.refresh_from_db()
    return run


def checkpoints(graph: str, thread_id: str) -> list[Any]:
    """The thread's snapshots, newest first (all of them: tests only)."""
    config = {"configurable": {"thread_id": thread_id}}
    return list(runnable(graph).get_state_history(config))


def checkpoint_id(snapshot: Any) -> str:
    return str(snapshot.config["configurable"]["checkpoint_id"])
