"""Two reviewers deciding one review at the same moment: exactly one wins.

Not collected by the main run (its name does not start with ``test_``):
``test_review_race.py`` runs it in a child pytest whose Django database is a
real Postgres (``TEST_DATABASE_URL``), where the transactions really overlap.
"""

from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections

from studio.errors import Conflict
from studio.models import ApprovalDecision, AuditEntry, PurchaseOutbox, Run
from studio.reviews.decisions import decide
from tests._support.invariants import assert_invariants
from tests._support.reviews import PURCHASE_GRAPHS, decision, member, purchase
from tests._support.studio import serve_graphs
from tests._support.threads import drain

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs(PURCHASE_GRAPHS)


@pytest.mark.parametrize("actions", [("approve", "reject"), ("approve", "approve")])
def test_two_reviewers_at_once_exactly_one_wins(actions: tuple[str, str]) -> None:
    reviewers = [member("rex", "reviewers"), member("ria", "reviewers")]
    thread_id = purchase(member("rita"), request_id="PO-RACE").thread_id
    start = threading.Barrier(2)
    outcomes: list[object] = []

    def attempt(index: int) -> None:
        start.wait(timeout=10)
        try:
            outcomes.append(
                decide(
                    reviewers[index],
                    thread_id,
                    decision("PO-RACE", actions[index], decision_id=f"d-{index}"),
                    strings=False,
                )
            )
        except Conflict as exc:
            outcomes.append(exc)
        finally:
            close_old_connections()

    workers = [threading.Thread(target=attempt, args=(i,)) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)

    refused = [o for o in outcomes if isinstance(o, Conflict)]
    assert len(outcomes) == 2 and len(refused) == 1, outcomes
    assert "already" in refused[0].message
    assert ApprovalDecision.objects.filter(request_id="PO-RACE").count() == 1
    assert (
        Run.objects.filter(thread_id=thread_id).count() == 2
    )  # the start and one resume
    drain()
    winner = ApprovalDecision.objects.get(request_id="PO-RACE")
    assert PurchaseOutbox.objects.count() == (1 if winner.action == "approve" else 0)
    assert AuditEntry.objects.filter(action="review.refused").count() == 1
    assert_invariants(studio=True)  # one decision, one resume, no stray purchase
