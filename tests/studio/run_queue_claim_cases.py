"""A claim: it reads the run queue in order by its own index (migration 0011) and
hands back the run as stored, in few statements.

Collected twice: by ``test_run_queue_claim.py`` on the suite's database (SQLite),
and by the same file's Postgres test in a child pytest on a real Postgres, whose
planner is the one that read past every finished run before the index: with an
index of all runs by ``created_at`` the claim walked it from the oldest run,
finished ones included (14 ms a claim with 100,000 of them). Its own name does
not start with ``test_``, so it is not collected a third time.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studio.models import Run, Thread
from studio.services import runs

pytestmark = pytest.mark.django_db

HISTORY = 300
"""Finished runs, all older than the queue."""


def _run(name: str, status: str, age: timedelta, **fields: Any) -> Run:
    thread = fields.pop("thread", None) or Thread.objects.create(graph="slow")
    created = timezone.now() - age
    return Run.objects.create(
        run_id=name,
        thread=thread,
        graph="slow",
        status=status,
        created_at=created,
        not_before=created,
        **fields,
    )


def _history() -> None:
    thread = Thread.objects.create(graph="slow")
    Run.objects.bulk_create(
        Run(
            run_id=f"done-{i}",
            thread=thread,
            graph="slow",
            status=Run.Status.SUCCESS,
            created_at=timezone.now() - timedelta(days=30, minutes=i),
        )
        for i in range(HISTORY)
    )


def _claim_query(queries: list[dict[str, Any]]) -> str:
    found = [q["sql"] for q in queries if '"not_before" <=' in q["sql"]]
    assert len(found) == 1, [q["sql"] for q in queries]
    return found[0]


def _plan(sql: str) -> str:
    """The database's plan for ``sql`` (a captured query, values inlined); on
    Postgres with the rows each node read (``EXPLAIN ANALYZE``, rolled back)."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
            return "\n".join(str(row[-1]) for row in cursor.fetchall())
        cursor.execute("ANALYZE studio_run")  # the planner sees the history
        cursor.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {sql}")
        return "\n".join(str(row[0]) for row in cursor.fetchall())


def test_a_claim_reads_the_queue_by_its_index_past_no_finished_run() -> None:
    _history()
    _run("newer", Run.Status.PENDING, timedelta(minutes=1))
    oldest = _run("oldest", Run.Status.PENDING, timedelta(minutes=2))

    with CaptureQueriesContext(connection) as captured:
        claimed = runs.claim("worker-a")

    assert claimed is not None and claimed.pk == oldest.pk
    plan = _plan(_claim_query(captured.captured_queries))
    assert "studio_run_queue_order" in plan, plan
    assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan  # already in order
    if connection.vendor == "postgresql":
        # the queue's scan hands back its first row: no finished run read and dropped
        scan = next(line for line in plan.splitlines() if "queue_order" in line)
        rest = plan.splitlines()[plan.splitlines().index(scan) + 1 :]
        assert not any("Rows Removed by Filter" in line for line in rest[:2]), plan


def test_a_claim_walks_past_a_run_not_due_and_a_busy_thread_in_queue_order() -> None:
    _history()
    busy = Thread.objects.create(graph="slow")
    _run("running", Run.Status.RUNNING, timedelta(minutes=9), thread=busy)
    _run("behind-running", Run.Status.PENDING, timedelta(minutes=8), thread=busy)
    later = _run("not-due", Run.Status.PENDING, timedelta(minutes=7))
    Run.objects.filter(pk=later.pk).update(not_before=timezone.now() + timedelta(1))
    waiting = Thread.objects.create(graph="slow")
    first = _run("first", Run.Status.PENDING, timedelta(minutes=6), thread=waiting)
    _run("second", Run.Status.PENDING, timedelta(minutes=5), thread=waiting)
    _run("other", Run.Status.PENDING, timedelta(minutes=4))

    claimed = runs.claim("worker-a")
    assert claimed is not None and claimed.pk == first.pk
    again = runs.claim("worker-b")  # "second" waits behind "first" on its thread
    assert again is not None and again.pk == "other"
    assert runs.claim("worker-c") is None


def test_a_claimed_run_is_handed_back_as_stored_with_its_creator() -> None:
    alice = User.objects.create_user("alice")
    queued = _run(
        "queued",
        Run.Status.PENDING,
        timedelta(minutes=1),
        created_by=alice,
        input={"text": "a"},
        config={"tags": ["x"]},
        attempt=1,
    )

    with CaptureQueriesContext(connection) as captured:
        claimed = runs.claim("worker-a")
        assert claimed is not None and claimed.created_by == alice  # read with it

    stored = Run.objects.get(pk=queued.pk)
    for field in Run._meta.concrete_fields:
        assert getattr(claimed, field.attname) == getattr(stored, field.attname), field
    assert (stored.status, stored.lease_owner, stored.attempt) == (
        "running",
        "worker-a",
        2,
    )
    # the read, the thread's lock (Postgres), the update (in a savepoint), the
    # thread's status; nothing read back after (savepoints not counted)
    statements = [
        q["sql"]
        for q in captured.captured_queries
        if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))
    ]
    expected = 4 if connection.vendor == "postgresql" else 3
    assert len(statements) == expected, statements
    assert not any("auth_user" in sql for sql in statements[1:]), statements


@pytest.mark.parametrize(
    ("status", "output", "thread_status"),
    [
        (Run.Status.SUCCESS, {"checkpointed": True}, Thread.Status.IDLE),
        (Run.Status.SUCCESS, {"interrupted": True}, Thread.Status.INTERRUPTED),
        (Run.Status.ERROR, {}, Thread.Status.ERROR),
    ],
)
def test_a_thread_settles_from_the_run_its_worker_just_ended_or_from_its_runs(
    status: str, output: dict[str, Any], thread_status: str
) -> None:
    ended = _run("ended", status, timedelta(minutes=1), output=output)
    Run.objects.filter(pk=ended.pk).update(started_at=timezone.now())
    thread_id = ended.thread_id

    with CaptureQueriesContext(connection) as told:
        runs.settle_thread(thread_id, ended=(status, output))
    assert Thread.objects.get(pk=thread_id).status == thread_status
    assert len(told.captured_queries) == 2  # the active runs' check, the update
    Thread.objects.filter(pk=thread_id).update(status=Thread.Status.BUSY)

    runs.settle_thread(thread_id)  # read from its runs: the same
    assert Thread.objects.get(pk=thread_id).status == thread_status

    _run("next", Run.Status.PENDING, timedelta(0), thread=ended.thread)
    runs.settle_thread(thread_id, ended=(status, output))  # another run waits
    assert Thread.objects.get(pk=thread_id).status == Thread.Status.BUSY
