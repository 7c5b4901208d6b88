"""The studio's own fault points, armed in this process (``engine.testing.arm_faults``).

* ``after_decision_before_resume``: the connection is lost after the decision row
  is written and before the resume run is queued. Both are one transaction, so
  neither is left: no decision without its resume, and the reviewer can decide
  again.
* ``after_outbox_before_end``: the purchase's outbox row is written, then the
  ``execute`` task fails before it returns. Its retry buys nothing more: one
  outbox row, two executions counted.

Every case ends with the studio and checkpoint invariants.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.conf import settings

from engine.testing import InjectedConnectionError, arm_faults
from studio.models import ApprovalDecision, PurchaseOutbox, ReviewRequest, Run
from studio.reviews.decisions import decide
from tests._support.invariants import assert_invariants
from tests._support.reviews import PURCHASE_GRAPHS, decision, member, purchase, ruling
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs(PURCHASE_GRAPHS)


@pytest.fixture(autouse=True)
def disarm() -> Iterator[None]:
    yield
    arm_faults(None)


def _invariants(thread_id: str) -> None:
    # the checkpoint file is this test process's: other tests' threads are there too
    assert_invariants(
        saver=str(settings.STUDIO_CHECKPOINT_DB), studio=True, threads=[thread_id]
    )


def test_connection_lost_between_decision_and_resume_leaves_neither() -> None:
    rita, rex = member("rita"), member("rex", "reviewers")
    run = purchase(rita, request_id="PO-F1", amount_minor=120_00)
    arm_faults("after_decision_before_resume=error")

    with pytest.raises(InjectedConnectionError):
        decide(rex, run.thread_id, decision("PO-F1", decision_id="d-f1"), strings=False)

    assert not ApprovalDecision.objects.filter(request_id="PO-F1").exists()
    assert Run.objects.filter(thread_id=run.thread_id).count() == 1  # no resume
    _invariants(run.thread_id)
    arm_faults(None)
    ruling(rex, run.thread_id, decision("PO-F1", decision_id="d-f1"))  # again: works
    assert ApprovalDecision.objects.get(request_id="PO-F1").run_id
    assert ReviewRequest.objects.get(request_id="PO-F1").outcome == "executed"
    assert PurchaseOutbox.objects.get(request_id="PO-F1").executions == 1
    _invariants(run.thread_id)


def test_failure_after_the_outbox_row_buys_once() -> None:
    rita, rex = member("rita"), member("rex", "reviewers")
    run = purchase(rita, request_id="PO-F2", amount_minor=120_00)
    arm_faults("after_outbox_before_end=error@1")

    ruling(rex, run.thread_id, decision("PO-F2"))

    resume = Run.objects.exclude(pk=run.pk).get(thread_id=run.thread_id)
    assert resume.status == Run.Status.SUCCESS, resume.error
    row = PurchaseOutbox.objects.get(request_id="PO-F2")
    assert row.executions == 2  # the retry ran the purchase again: bought once
    assert ReviewRequest.objects.get(request_id="PO-F2").outcome == "executed"
    _invariants(run.thread_id)


def test_a_worker_that_fails_right_after_its_claim_gives_the_run_back() -> None:
    from django.utils import timezone  # noqa: PLC0415

    from studio.services import runs  # noqa: PLC0415
    from studio.services.worker import Worker  # noqa: PLC0415
    from tests._support.invariants import check_studio  # noqa: PLC0415

    rita = member("rita")
    run = runs.start_run(
        graph="purchase",
        user=rita,
        input={"request_id": "PO-F3", "approval_version": 1, "amount_minor": 120_00},
    )
    arm_faults("after_claim=error@1")
    worker = Worker(name="claims-then-fails", lease_seconds=0.5)

    with pytest.raises(InjectedConnectionError):
        worker.run_once()

    run.refresh_from_db()
    assert (run.status, run.attempt) == (Run.Status.RUNNING, 1)
    later = timezone.now() + timezone.timedelta(seconds=5)
    (problem,) = check_studio(now=later)  # what the invariant sees if nobody requeues
    assert problem.startswith(
        f"stale run: run {run.run_id} of thread {run.thread_id!r} is still running"
    )
    deadline = time.monotonic() + 30
    while not worker.run_once():  # requeued once its lease ended, then run
        assert time.monotonic() < deadline
        time.sleep(0.2)
    run.refresh_from_db()
    assert (run.status, run.attempt) == (Run.Status.SUCCESS, 2)
    _invariants(run.thread_id)
