"""The run queue under races and dying workers, on whatever database Django uses.

Collected twice: by ``test_run_races.py`` on the suite's database (SQLite, where
writers take turns), and by ``test_review_race.py`` in a child pytest whose
database is a real Postgres (``TEST_DATABASE_URL``), where transactions overlap.
Its own name does not start with ``test_``, so it is not collected a third time.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypedDict

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.test import Client, override_settings
from django.utils import timezone
from psycopg.conninfo import make_conninfo

from engine.graph import END, START, StateGraph
from engine.types import interrupt
from studio.models import ApiToken, ApprovalDecision, Run, RunEvent, Thread
from studio.services import run_queue, runs
from studio.services.worker import Worker
from tests._support.invariants import assert_invariants
from tests._support.reviews import decision, member, purchase
from tests._support.studio import serve_graphs
from tests._support.threads import drain

pytestmark = pytest.mark.django_db(transaction=True)

CLAIM_ROUNDS = int(os.environ.get("STUDIO_CLAIM_RACE_ROUNDS", "1000"))
"""How many times two workers race for one run (1,000 unless the env says)."""


class Ask(TypedDict, total=False):
    answer: str
    done: str


executions: dict[str, int] = {"act": 0}
_count = threading.Lock()


def asking() -> Any:
    """START -> ask (interrupts) -> act (counts its executions) -> END."""

    def ask(state: Ask) -> dict[str, Any]:
        return {"answer": interrupt("go?")}

    def act(state: Ask) -> dict[str, Any]:
        with _count:
            executions["act"] += 1
        return {"done": state["answer"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Ask)
    builder.add_node("ask", ask)
    builder.add_node("act", act)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "act")
    builder.add_edge("act", END)
    return builder.compile()


_graphs = serve_graphs(
    {
        "purchase": "studio.demo_graphs.purchase:build",
        "asking": "tests.studio.run_race_cases:asking",
        "slow": "tests.studio.engine_graphs_for_tests:slow",
    }
)


def _at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads released together; their results (or exceptions)."""
    start = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def attempt(index: int) -> None:
        try:
            start.wait(timeout=10)
            results[index] = calls[index]()
        except Exception as exc:
            results[index] = exc
        finally:
            close_old_connections()

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def _invariants(*, saver: bool = True) -> None:
    """The invariants of ``tests._support.invariants`` on the studio's tables and,
    with ``saver``, on the checkpoint database (the studio's SQLite file, or the
    same Postgres database)."""
    target = None
    if saver:
        db = connection.settings_dict
        if connection.vendor == "postgresql":
            target = make_conninfo(
                host=db["HOST"] or "127.0.0.1",
                port=str(db["PORT"] or 5432),
                user=db["USER"] or "postgres",
                password=db["PASSWORD"] or "",
                dbname=db["NAME"],
            )
        else:
            target = str(settings.STUDIO_CHECKPOINT_DB)
    # this test's threads only: the SQLite checkpoint file is shared by the whole
    # test process, and other tests tamper with their own rows on purpose
    threads = list(Thread.objects.values_list("thread_id", flat=True))
    assert_invariants(saver=target, studio=True, threads=threads)


def _pending_run(owner: User, thread: Thread | None = None, **fields: Any) -> Run:
    thread = thread or Thread.objects.create(owner=owner, graph="slow")
    return Run.objects.create(thread=thread, graph="slow", input={}, **fields)


def _expire(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


# -- one running run per thread, kept by the database ------------------------------------


def test_the_database_refuses_a_second_running_run_on_a_thread() -> None:
    owner = member("ori")
    first = _pending_run(owner)
    second = _pending_run(owner, first.thread)
    Run.objects.filter(pk=first.pk).update(status=Run.Status.RUNNING)

    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=second.pk).update(status=Run.Status.RUNNING)

    # other statuses are not limited, nor are running runs of other threads
    Run.objects.filter(pk=second.pk).update(status=Run.Status.SUCCESS)
    _pending_run(owner)
    Run.objects.filter(status=Run.Status.PENDING).update(status=Run.Status.RUNNING)
    assert Run.objects.filter(status=Run.Status.RUNNING).count() == 2


def test_a_claim_that_loses_to_the_index_claims_nothing_and_moves_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = member("ori")
    held = _pending_run(owner)
    assert runs.claim("first") is not None
    stale = _pending_run(owner, held.thread)
    other = _pending_run(owner)
    # what a worker's stale read would offer without the thread lock: a run of
    # the busy thread, then one of another thread
    monkeypatch.setattr(
        run_queue,
        "candidates",
        lambda now: Run.objects.filter(
            status=Run.Status.PENDING, not_before__lte=now
        ).order_by("created_at"),
    )

    claimed = runs.claim("second")

    assert claimed is not None and claimed.pk == other.pk
    stale.refresh_from_db()
    assert stale.status == Run.Status.PENDING and stale.attempt == 0
    assert (
        Run.objects.filter(thread=held.thread, status=Run.Status.RUNNING).count() == 1
    )
    _invariants(saver=False)


@pytest.mark.slow
def test_two_workers_claiming_one_run_take_it_exactly_once() -> None:
    """Two workers race for one due run, ``CLAIM_ROUNDS`` times; every other round
    the thread has two runs queued at the same instant (both due), so the race is
    for the thread as well as for the row."""
    owner = member("ori")
    gate = threading.Barrier(3)
    claims: list[list[str | None]] = [[], []]
    failures: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            for _ in range(CLAIM_ROUNDS):
                gate.wait(timeout=30)
                run = runs.claim(f"w{index}", lease_seconds=60)
                claims[index].append(run.pk if run is not None else None)
                gate.wait(timeout=30)
        except BaseException as exc:
            failures.append(exc)
            gate.abort()
        finally:
            close_old_connections()

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in workers:
        thread.start()
    made: list[list[str]] = []
    try:
        for round_ in range(CLAIM_ROUNDS):
            thread = Thread.objects.create(owner=owner, graph="slow")
            now = timezone.now()
            queued = [_pending_run(owner, thread, created_at=now)]
            if round_ % 2:
                queued.append(_pending_run(owner, thread, created_at=now))
            made.append([r.pk for r in queued])
            gate.wait(timeout=30)  # go
            gate.wait(timeout=30)  # both claimed
            Run.objects.filter(thread=thread).update(status=Run.Status.SUCCESS)
    except threading.BrokenBarrierError:
        pass
    for thread in workers:
        thread.join(timeout=30)

    assert not failures, failures
    assert len(claims[0]) == len(claims[1]) == CLAIM_ROUNDS
    for round_, queued in enumerate(made):
        taken = [c for c in (claims[0][round_], claims[1][round_]) if c is not None]
        assert len(taken) == 1 and taken[0] in queued, (round_, queued, taken)
    attempts = Run.objects.exclude(attempt=0).values_list("attempt", flat=True)
    assert len(attempts) == CLAIM_ROUNDS and set(attempts) == {1}
    _invariants(saver=False)


# -- a run whose worker dies every time ---------------------------------------------------


@pytest.mark.parametrize("limit", [3, 2])
def test_a_run_whose_worker_dies_every_time_ends_as_an_error(limit: int) -> None:
    owner = member("ori")
    poison = runs.start_run(graph="slow", user=owner, input={"text": "poison"})
    others = [
        runs.start_run(graph="slow", user=owner, input={"text": f"ok {i}"})
        for i in range(limit + 1)
    ]
    healthy = Worker(name="healthy")
    finished: list[str] = []
    with override_settings(STUDIO_RUN_MAX_ATTEMPTS=limit):
        for attempt in range(1, limit + 1):
            claimed = runs.claim(f"doomed-{attempt}")  # this worker dies with it
            assert claimed is not None and claimed.pk == poison.pk
            assert claimed.attempt == attempt
            # meanwhile another worker goes on with the other threads' runs
            assert healthy.run_once()
            finished.append(others[attempt - 1].pk)
            _expire(poison)
            taken_back = runs.requeue_expired()
            poison.refresh_from_db()
            if attempt < limit:
                assert taken_back == 1 and poison.status == Run.Status.PENDING
            else:
                assert taken_back == 0 and poison.status == Run.Status.ERROR
        assert healthy.run_once()  # the last of the others: nothing holds them
        assert runs.claim("anyone") is None

    assert poison.error is not None
    assert poison.error["error"] == "RunAttemptsExhausted"
    assert poison.error["attempts"] == limit
    assert f"on each of {limit} attempts" in poison.error["message"]
    assert poison.finished_at is not None and not poison.lease_owner
    assert Thread.objects.get(pk=poison.thread_id).status == Thread.Status.ERROR
    last = RunEvent.objects.filter(run=poison).latest("id")
    assert last.kind == "run.status" and last.payload["status"] == Run.Status.ERROR
    assert last.payload["error"]["error"] == "RunAttemptsExhausted"
    assert set(
        Run.objects.filter(pk__in=[o.pk for o in others]).values_list(
            "status", flat=True
        )
    ) == {Run.Status.SUCCESS}
    _invariants()


def test_a_run_that_was_given_up_is_not_given_up_twice() -> None:
    owner = member("ori")
    run = _pending_run(owner, attempt=2)
    with override_settings(STUDIO_RUN_MAX_ATTEMPTS=3):
        assert runs.claim("doomed") is not None
        _expire(run)
        results = _at_once(runs.requeue_expired, runs.requeue_expired)
    assert results == [0, 0], results
    assert RunEvent.objects.filter(run=run, kind="run.status").count() == 1
    run.refresh_from_db()
    assert run.status == Run.Status.ERROR and run.attempt == 3


# -- the same resume twice at once ---------------------------------------------------------


def _api(user: User) -> Client:
    return Client(HTTP_X_API_KEY=ApiToken.issue(user)[1])


def _post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(
        f"/api{path}", data=json.dumps(body), content_type="application/json"
    )


def test_the_same_resume_twice_at_once_through_the_api_runs_the_next_node_once() -> (
    None
):
    owner = member("ori")
    client = _api(owner)
    started = _post(
        client,
        "/runs",
        {"assistant_id": "asking", "input": {}, "on_completion": "keep"},
    )
    assert started.status_code == 200, started.content
    drain()
    thread_id = started.json()["thread_id"]
    executions["act"] = 0
    resume = {"assistant_id": "asking", "command": {"resume": "yes"}}
    path = f"/threads/{thread_id}/runs"

    answers = _at_once(
        lambda: _post(client, path, resume), lambda: _post(client, path, resume)
    )
    drain()

    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 409], [a.content for a in answers]
    refused = next(a for a in answers if a.status_code == 409).json()
    assert "already" in refused["detail"] and "resum" in refused["detail"]
    assert executions["act"] == 1
    resumes = Run.objects.filter(thread_id=thread_id, command__isnull=False)
    assert [r.status for r in resumes] == [Run.Status.SUCCESS]
    _invariants()


def test_the_same_decision_through_the_api_and_the_form_at_once_resumes_once() -> None:
    reviewer = member("rex", "reviewers")
    thread_id = purchase(member("rita"), request_id="PO-TWICE").thread_id
    body = decision("PO-TWICE", "approve", decision_id="d-twice")
    client = _api(reviewer)
    page = Client()
    page.force_login(reviewer)

    answers = _at_once(
        lambda: _post(
            client,
            f"/threads/{thread_id}/runs",
            {"assistant_id": "purchase", "command": {"resume": body}},
        ),
        lambda: page.post(f"/reviews/{thread_id}/", {**body, "approval_version": "1"}),
    )
    drain()

    assert ApprovalDecision.objects.filter(request_id="PO-TWICE").count() == 1
    resumes = Run.objects.filter(thread_id=thread_id, command__isnull=False)
    assert resumes.count() == 1 and resumes.get().status == Run.Status.SUCCESS
    codes = [getattr(a, "status_code", a) for a in answers]
    assert all(isinstance(c, int) and c < 500 for c in codes), answers
    _invariants()


# -- one idempotency key, two requests at once ---------------------------------------------

KEY_ROUNDS = 20


@pytest.mark.parametrize("stateless", [True, False])
def test_two_requests_with_one_idempotency_key_at_once_make_one_run(
    stateless: bool,
) -> None:
    owner = member("ori")
    client = _api(owner)
    body = {"assistant_id": "slow", "input": {"text": "once"}}
    for round_ in range(KEY_ROUNDS):
        if stateless:
            path = "/runs"
        else:
            made = _post(client, "/threads", {})
            path = f"/threads/{made.json()['thread_id']}/runs"
        key = f"key-{stateless}-{round_}"

        def send(path: str = path, key: str = key) -> Any:
            return client.post(
                f"/api{path}",
                data=json.dumps(body),
                content_type="application/json",
                headers={"Idempotency-Key": key},
            )

        answers = _at_once(send, send)

        assert [getattr(a, "status_code", a) for a in answers] == [200, 200], answers
        run_ids = {a.json()["run_id"] for a in answers}
        assert len(run_ids) == 1, round_
        assert Run.objects.filter(idempotency_key=key).count() == 1
    assert Run.objects.count() == KEY_ROUNDS
    assert Thread.objects.count() == KEY_ROUNDS  # a loser's new thread was not kept
    _invariants(saver=False)
