"""The run queue and the worker, on the real SQLite checkpointer and the test database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from studio.errors import Conflict, ThreadNotFound
from studio.models import PurchaseOutbox, Run, RunEvent, Thread
from studio.reviews.decisions import decide
from studio.services import access, runs
from studio.services import worker as worker_module
from studio.services.registered_graphs import runnable
from studio.services.worker import Worker
from tests._support.reviews import member
from tests._support.studio import serve_graphs
from tests.studio import engine_graphs_for_tests as test_graphs
from tests.studio.engine_graphs_for_tests import calls

pytestmark = pytest.mark.django_db(transaction=True)

GRAPHS = {
    "purchase": "studio.demo_graphs.purchase:build",
    "failing": "tests.studio.engine_graphs_for_tests:failing",
    "slow": "tests.studio.engine_graphs_for_tests:slow",
    "draining": "tests.studio.engine_graphs_for_tests:draining",
}
REQUEST = {
    "request_id": "R-7",
    "approval_version": 1,
    "amount_minor": 120_000,
    "vendor": "Acme",
}


_graphs = serve_graphs(GRAPHS)


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", password="x")


@pytest.fixture
def bob() -> User:
    return member("bob", "reviewers")


def decision(action: str = "approve", version: int = 1) -> dict[str, Any]:
    return {
        "request_id": "R-7",
        "approval_version": version,
        "decision_id": f"d-{action}-{version}",
        "action": action,
        "reason": "looks fine",
    }


def test_worker_runs_purchase_to_the_review_and_records_events(alice: User) -> None:
    run = runs.start_run(graph="purchase", user=alice, input=REQUEST)

    assert Worker().run_once()

    run.refresh_from_db()
    thread = Thread.objects.get(pk=run.thread_id)
    kinds = list(
        RunEvent.objects.filter(run=run).order_by("id").values_list("kind", flat=True)
    )
    ended = [
        e.payload["node"]
        for e in RunEvent.objects.filter(run=run, kind="task.end").order_by("id")
    ]
    assert run.status == Run.Status.SUCCESS and run.output["interrupted"] is True
    assert thread.status == Thread.Status.INTERRUPTED and thread.has_state
    assert kinds[0] == "run.status" and kinds[-1] == "run.status"
    assert {"task.start", "task.end", "step", "checkpoint", "interrupt"} <= set(kinds)
    assert sorted(ended) == ["budget", "compliance", "human_review", "normalize"]
    assert not Worker().run_once()


def test_resume_executes_the_purchase_once(alice: User, bob: User) -> None:
    first = runs.start_run(graph="purchase", user=alice, input=REQUEST)
    Worker().run_once()
    outcome = decide(bob, first.thread_id, decision(), strings=False)

    Worker().run_once()

    second = Run.objects.get(pk=outcome.run_id)
    assert second.status == Run.Status.SUCCESS
    assert Thread.objects.get(pk=first.thread_id).status == Thread.Status.IDLE
    assert PurchaseOutbox.objects.filter(request_id="R-7").count() == 1


def test_requester_is_the_user_who_started_the_run(alice: User) -> None:
    run = runs.start_run(graph="purchase", user=alice, input=REQUEST)
    Worker().run_once()

    interrupt = RunEvent.objects.get(run=run, kind="interrupt").payload["interrupts"][0]

    assert interrupt["value"]["requester"] == "alice"


def test_client_sent_requester_is_refused(alice: User) -> None:
    # The engine ignores unknown input keys by default (as LangGraph does); the
    # purchase graph compiles with strict_input=True, so a client cannot even try
    # to name the requester: the run fails before any node runs.
    run = runs.start_run(
        graph="purchase", user=alice, input={**REQUEST, "requester": "mallory"}
    )

    Worker().run_once()

    run.refresh_from_db()
    assert run.status == Run.Status.ERROR
    assert run.error["error"] == "InvalidUpdateError"
    assert "'requester'" in run.error["message"]
    assert "strict_input=True" in run.error["message"]
    assert Thread.objects.get(pk=run.thread_id).status == Thread.Status.ERROR


def test_failing_graph_marks_run_and_thread_failed(alice: User) -> None:
    run = runs.start_run(graph="failing", user=alice, input={"text": "x"})

    Worker().run_once()

    run.refresh_from_db()
    assert run.status == Run.Status.ERROR
    assert run.error == {"error": "ValueError", "message": "the node failed on purpose"}
    assert Thread.objects.get(pk=run.thread_id).display_status == "failed"


def test_reject_strategy_refuses_a_busy_thread(alice: User) -> None:
    first = runs.start_run(graph="slow", user=alice, input={"text": "a"})

    with pytest.raises(Conflict, match="already running"):
        runs.start_run(
            graph="slow",
            user=alice,
            thread_id=first.thread_id,
            input={},
            strategy="reject",
        )

    assert Run.objects.filter(thread_id=first.thread_id).count() == 1


def test_enqueued_runs_on_one_thread_run_in_order(alice: User) -> None:
    first = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    second = runs.start_run(
        graph="slow", user=alice, thread_id=first.thread_id, input={"text": "b"}
    )
    worker = Worker()

    assert worker.claim() is not None
    assert worker.claim() is None  # the thread already has a running run

    Run.objects.filter(pk=first.pk).update(status=Run.Status.SUCCESS)
    claimed = worker.claim()
    assert claimed is not None and claimed.pk == second.pk


def test_expired_lease_is_requeued_and_continues_from_its_checkpoint(
    alice: User,
) -> None:
    run = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    dead = Worker(name="dead-worker")
    claimed = dead.claim()
    assert claimed is not None
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert Worker(name="rescuer").run_once()

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCESS and run.attempt == 2


def test_a_lease_sweep_finding_nothing_expired_reads_once_and_writes_nothing(
    alice: User, django_assert_num_queries: Any
) -> None:
    run = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    assert Worker(name="alive").claim() is not None  # running, its lease ahead

    with django_assert_num_queries(1):  # every claim sweeps first
        assert runs.requeue_expired() == 0

    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.lease_owner == "alive"


def test_a_run_taken_over_between_its_claim_and_its_start_is_not_run_by_the_first(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    run = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    first = Worker(name="first")
    claimed = first.claim()
    assert claimed is not None
    Run.objects.filter(pk=run.pk).update(lease_owner="second")  # its lease taken
    before = calls["slow"]

    first.execute(claimed)

    assert calls["slow"] == before  # the graph did not run here
    assert not RunEvent.objects.filter(run=run).exists()  # not even its start
    run.refresh_from_db()
    assert (run.status, run.lease_owner) == (Run.Status.RUNNING, "second")
    assert "lost its lease" in caplog.text


def test_a_busy_worker_sweeps_expired_leases_once_a_second_not_every_claim(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    for text in ("a", "b", "c"):
        runs.start_run(graph="slow", user=alice, input={"text": text})
    worker = Worker(name="busy")
    sweeps: list[float] = []
    clock = [1000.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(
        worker_module, "requeue_expired", lambda: sweeps.append(clock[0]) or 0
    )

    assert worker.run_once()  # its first claim looks
    clock[0] += worker_module.REQUEUE_SECONDS / 2
    assert worker.run_once()  # half a second later: not again
    clock[0] += worker_module.REQUEUE_SECONDS / 2
    assert worker.run_once()  # a second after the first: again

    assert sweeps == [1000.0, 1000.0 + worker_module.REQUEUE_SECONDS]


def test_a_lease_sweep_leaves_a_run_renewed_after_it_read(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    assert Worker(name="slow-beat").claim() is not None
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    limit = runs.max_attempts()

    def renewed_after_the_read() -> int:  # asked between the read and the update
        Run.objects.filter(pk=run.pk).update(
            lease_expires_at=timezone.now() + timedelta(seconds=30)
        )
        return limit

    monkeypatch.setattr(runs, "max_attempts", renewed_after_the_read)

    assert runs.requeue_expired() == 0
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.lease_owner == "slow-beat"


def test_cancel_a_pending_run(alice: User) -> None:
    run = runs.start_run(
        graph="slow", user=alice, input={"text": "a"}, after_seconds=60
    )

    runs.cancel_run(run, alice)

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.cancel_requested == "interrupt"
    assert Thread.objects.get(pk=run.thread_id).status == Thread.Status.IDLE
    with pytest.raises(Conflict):
        runs.cancel_run(run, alice)


def test_after_seconds_delays_the_claim(alice: User) -> None:
    runs.start_run(graph="slow", user=alice, input={"text": "a"}, after_seconds=60)

    assert Worker().claim() is None


def test_another_users_thread_is_not_found(alice: User) -> None:
    run = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    mallory = User.objects.create_user("mallory", password="x")

    with pytest.raises(ThreadNotFound):
        access.visible_thread(mallory, run.thread_id)
    with pytest.raises(ThreadNotFound):
        runs.start_run(graph="slow", user=mallory, thread_id=run.thread_id, input={})


def test_requeued_run_resumes_from_its_own_checkpoint_without_redoing_steps(
    alice: User,
) -> None:
    run = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    Worker(name="dead-worker").claim()
    # the dead worker got as far as the first step before it died
    runnable("slow").invoke(
        {"text": "a"},
        {
            "configurable": {"thread_id": run.thread_id},
            "metadata": {"run_id": run.run_id},
        },
        interrupt_before=["wait"],
    )
    before = calls["slow"]
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    Worker(name="rescuer").run_once()

    run.refresh_from_db()
    state = runnable("slow").get_state({"configurable": {"thread_id": run.thread_id}})
    assert run.status == Run.Status.SUCCESS
    assert calls["slow"] == before  # "first" did not run again
    assert state.values["log"] == ["first", "waited"]


def test_a_changed_request_gets_a_new_version_and_runs_the_checks_again(
    alice: User, bob: User
) -> None:
    first = runs.start_run(graph="purchase", user=alice, input=REQUEST)
    Worker().run_once()
    changed = {**REQUEST, "approval_version": 2, "amount_minor": 20_000_000}
    runs.start_run(
        graph="purchase", user=alice, thread_id=first.thread_id, input=changed
    )

    Worker().run_once()

    payload = (
        RunEvent.objects.filter(thread_id=first.thread_id, kind="interrupt")
        .last()
        .payload
    )
    review = payload["interrupts"][0]["value"]
    assert review["approval_version"] == 2
    assert [(c["check"], c["ok"]) for c in review["checks"]] == [
        ("budget", False),
        ("compliance", True),
    ]
    assert review["checks_passed"] is False
    # approving version 2 cannot override the failed budget check
    decide(bob, first.thread_id, decision(version=2), strings=False)
    senior = member("sam", "senior-reviewers")  # above 50,000 CNY: a second level
    decide(
        senior,
        first.thread_id,
        {**decision(version=2), "decision_id": "d-2"},
        strings=False,
    )
    Worker().run_once()
    state = runnable("purchase").get_state(
        {"configurable": {"thread_id": first.thread_id}}
    )
    assert state.values["status"] == "rejected"
    assert "exceeds the limit" in state.values["result"]
    assert not PurchaseOutbox.objects.filter(request_id="R-7").exists()


def test_a_stopping_worker_gives_its_run_back_at_the_next_step(alice: User) -> None:
    """SIGTERM (``Worker.drain``) ends the run in progress at its next step boundary:
    that step is saved, the run goes back to the queue without using up an attempt,
    and the next worker continues from the saved step: nothing runs twice, and the
    resume the run carried is not sent again."""
    test_graphs.drain_calls.update(ask=0, first=0, second=0)
    asked = runs.start_run(graph="draining", user=alice, input={"text": "t"})
    Worker(name="w0").run_once()
    resume = runs.start_run(
        graph="draining",
        user=alice,
        thread_id=asked.thread_id,
        command={"resume": "yes"},
    )
    stopping = Worker(name="stopping")
    test_graphs.on_first.append(stopping.drain)
    try:
        assert stopping.run_once()
    finally:
        test_graphs.on_first.clear()

    resume.refresh_from_db()
    assert resume.status == Run.Status.PENDING
    assert resume.attempt == 0 and resume.lease_owner == ""
    assert stopping.stopping.is_set()
    last = RunEvent.objects.filter(run=resume).order_by("-id").first()
    assert last is not None and last.payload == {"status": "pending", "drained": True}
    assert test_graphs.drain_calls == {"ask": 2, "first": 1, "second": 0}

    assert Worker(name="next").run_once()

    resume.refresh_from_db()
    state = runnable("draining").get_state(
        {"configurable": {"thread_id": resume.thread_id}}
    )
    assert resume.status == Run.Status.SUCCESS, resume.error
    assert resume.attempt == 1
    assert test_graphs.drain_calls == {"ask": 2, "first": 1, "second": 1}
    assert state.values["log"] == ["answer:yes", "first", "second"]
