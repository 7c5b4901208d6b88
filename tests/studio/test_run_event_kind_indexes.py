"""Run events of rare kinds are found by their partial indexes, not by reading
back through a thread's or run's other events (migration 0010).

Each test captures the queries a service runs and asks the database for the
plan of the one looking for that kind: it must name the kind's index. Without
the index the same query is answered through ``(thread, id)`` or ``(run, id)``,
reading every newer event of another kind first (11 ms for a 40,000-event thread
on the thread page; see ``benchmarks/studio_pages.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from studio.models import Run, RunEvent, Thread
from studio.services import transcript
from studio.services.activity import ACTIVITY_LIMIT, activity
from studio.services.model_tokens import TOKEN

pytestmark = pytest.mark.django_db


def _thread_with_run(status: str = "succeeded") -> tuple[Thread, Run]:
    owner = User.objects.create_user("ada")
    thread = Thread.objects.create(graph="purchase", owner=owner)
    return thread, Run.objects.create(thread=thread, graph="purchase", status=status)


def _events(run: Run, kind: str, count: int) -> None:
    RunEvent.objects.bulk_create(
        RunEvent(run=run, thread=run.thread, kind=kind, payload={"node": "a"})
        for _ in range(count)
    )


def _plan(sql: str) -> str:
    """The database's plan for ``sql`` (a captured query, values inlined)."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
            return "\n".join(str(row[-1]) for row in cursor.fetchall())
        # a small table is read whole by any planner that may: ask for the index's plan
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(str(row[0]) for row in cursor.fetchall())


def _query_for(queries: list[dict[str, Any]], kind: str) -> str:
    found = [q["sql"] for q in queries if f"\"kind\" = '{kind}'" in q["sql"]]
    assert len(found) == 1, [q["sql"] for q in queries]
    return found[0]


def test_the_newest_token_of_a_thread_is_found_by_its_index() -> None:
    thread, run = _thread_with_run()
    _events(run, TOKEN, 3)
    _events(run, "task.end", 200)  # newer than every token

    with CaptureQueriesContext(connection) as captured:
        view = activity(str(thread.thread_id), ["a"])

    newest = RunEvent.objects.filter(thread=thread).order_by("-id").first()
    assert newest is not None and view.last_event_id == newest.id
    plan = _plan(_query_for(captured.captured_queries, TOKEN))
    assert "studio_runevent_thread_token" in plan, plan


def test_a_threads_last_status_past_its_newest_events_is_found_by_its_index() -> None:
    thread, run = _thread_with_run()
    _events(run, "run.status", 1)
    _events(run, "task.end", ACTIVITY_LIMIT + 10)  # the status is not among them

    with CaptureQueriesContext(connection) as captured:
        view = activity(str(thread.thread_id), ["a"])

    assert view.outcome is not None and view.outcome["kind"] == "run.status"
    plan = _plan(_query_for(captured.captured_queries, "run.status"))
    assert "studio_runevent_thread_status" in plan, plan


def test_a_running_runs_streamed_tokens_are_read_by_their_index() -> None:
    thread, run = _thread_with_run(status="running")
    _events(run, "task.end", 50)

    with CaptureQueriesContext(connection) as captured:
        assert transcript._streaming(thread, set(), None) == ()

    plan = _plan(_query_for(captured.captured_queries, TOKEN))
    assert "studio_runevent_run_token" in plan, plan
