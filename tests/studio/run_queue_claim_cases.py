"""A worker's hold on a run: a claim reads the run queue in order by its own index
(migration 0011) and hands back the run as stored, in few statements; a thread
settles from the run its worker ended; the run's events are stored only while
its worker holds it, checked by the insert itself.

Collected twice: by ``test_run_queue_claim.py`` on the suite's database (SQLite),
and by the same file's Postgres test in a child pytest on a real Postgres, whose
planner is the one that read past every finished run before the index: with an
index of all runs by ``created_at`` the claim walked it from the oldest run,
finished ones included (14 ms a claim with 100,000 of them). Its own name does
not start with ``test_``, so it is not collected a third time.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studio.models import Run, RunEvent, Thread
from studio.services import run_log, run_queue, runs

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
    # in its transaction (a savepoint here, inside the test's): the pick, the
    # run's read, the thread's lock (Postgres), the update, the thread's status;
    # nothing after
    statements = [q["sql"] for q in captured.captured_queries]
    assert statements[0].startswith("SAVEPOINT"), statements
    assert statements[-1].startswith("RELEASE SAVEPOINT"), statements
    expected = 7 if connection.vendor == "postgresql" else 6
    assert len(statements) == expected, statements
    assert "auth_user" in statements[2]  # the picked run read with its creator
    assert not any("auth_user" in sql for sql in statements[3:]), statements


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

    runs.settle_thread(thread_id, ended=(status, output), has_state=True)
    assert Thread.objects.filter(pk=thread_id, has_state=True).exists()

    _run("next", Run.Status.PENDING, timedelta(0), thread=ended.thread)
    runs.settle_thread(thread_id, ended=(status, output))  # another run waits
    assert Thread.objects.get(pk=thread_id).status == Thread.Status.BUSY


def _held_run(owner: str = "worker-a") -> Run:
    return _run("held", Run.Status.RUNNING, timedelta(minutes=1), lease_owner=owner)


def _batch(run: Run) -> list[RunEvent]:
    payloads = [
        (
            "task.start",
            {"node": "plan", "note": "caf\u00e9 \u2713", "n": [1, 2.5, None]},
        ),
        ("step", {"checkpoint_id": "c-1", "step": 1}),
        ("step", {"checkpoint_id": "c-2", "ns": "child:1"}),  # a subgraph's: no id
    ]
    return [
        RunEvent(run=run, thread_id=run.thread_id, kind=kind, payload=payload)
        for kind, payload in payloads
    ]


def _stored(pks: list[int]) -> list[tuple[Any, ...]]:
    fields = ("run_id", "thread_id", "kind", "payload", "checkpoint_id", "created_at")
    rows = RunEvent.objects.filter(pk__in=pks).order_by("pk").values_list(*fields)
    return [tuple(row) for row in rows]


def test_a_held_runs_events_are_stored_as_bulk_create_stores_them() -> None:
    run = _held_run()
    held, plain = _batch(run), _batch(run)
    for mine, theirs in zip(held, plain, strict=True):
        theirs.created_at = mine.created_at

    assert RunEvent.objects.create_while_held(held, run.pk, "worker-a")
    RunEvent.objects.bulk_create(plain)

    pks = [event.pk for event in held]
    assert pks == sorted(pks) and all(pks)
    assert _stored(pks) == _stored([event.pk for event in plain])
    stored = RunEvent.objects.filter(pk__in=pks).order_by("pk")
    assert [event.checkpoint_id for event in stored] == [None, "c-1", None]


@pytest.mark.parametrize(
    ("status", "owner"),
    [
        (Run.Status.RUNNING, "worker-b"),  # taken over
        (Run.Status.PENDING, ""),  # swept back to the queue
        (Run.Status.SUCCESS, ""),  # ended by someone else
    ],
)
def test_events_of_a_run_its_worker_no_longer_holds_are_not_stored(
    status: str, owner: str, caplog: pytest.LogCaptureFixture
) -> None:
    run = _held_run()
    Run.objects.filter(pk=run.pk).update(status=status, lease_owner=owner)
    writer = run_log.EventWriter(run, owner="worker-a")

    writer.add("task.start", {"node": "plan"})  # urgent: stored at once, or not
    writer.add("task.start", {"node": "act"})

    assert writer.lost and not RunEvent.objects.filter(run=run).exists()
    assert caplog.text.count("lost its lease") == 1


@pytest.mark.django_db(transaction=True)
def test_a_takeover_under_way_makes_the_waiting_insert_store_nothing() -> None:
    """Postgres: the insert waits for the takeover's lock on the run, then finds
    the run taken. (SQLite has one writer at a time: no insert is under way
    while a takeover is.)"""
    if connection.vendor != "postgresql":
        pytest.skip("writers that overlap: Postgres only")
    run = _held_run()
    outcome: list[bool] = []

    def insert() -> None:
        try:
            outcome.append(
                RunEvent.objects.create_while_held(_batch(run), run.pk, "worker-a")
            )
        finally:
            connection.close()

    with transaction.atomic():  # the takeover, not committed yet
        Run.objects.filter(pk=run.pk).update(lease_owner="worker-b")
        waiting = threading.Thread(target=insert)
        waiting.start()
        time.sleep(0.3)
        assert waiting.is_alive() and not outcome  # blocked on the run's row
    waiting.join(10)

    assert outcome == [False]
    assert not RunEvent.objects.filter(run=run).exists()


def test_the_queues_query_is_built_and_compiled_once_then_run_with_each_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[Any] = []
    original = run_queue.candidates

    def counted(now: Any) -> Any:
        built.append(now)
        return original(now)

    monkeypatch.setattr(run_queue, "candidates", counted)
    first = _run("first", Run.Status.PENDING, timedelta(minutes=2))
    later = _run("later", Run.Status.PENDING, timedelta(minutes=1))
    Run.objects.filter(pk=later.pk).update(not_before=timezone.now() + timedelta(1))

    claimed = runs.claim("worker-a")
    assert claimed is not None and claimed.pk == first.pk
    compiled = len(built)  # the two compilations that find where the time goes
    assert runs.claim("worker-b") is None  # "later" is not due at this claim's time
    Run.objects.filter(pk=later.pk).update(not_before=timezone.now())
    again = runs.claim("worker-b")
    assert again is not None and again.pk == later.pk

    assert compiled == 2 and len(built) == compiled  # not built again
