"""The reviewer console's rules: the decision protocol, the ledger, governed time travel.

Real worker, real SQLite checkpointer, the real purchase graph. Each bypass of
the reproduction in the issue (fork as ``human_review``, editing ``budget_ok``,
approving one's own request) has a test that it is refused and buys nothing.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from studio.errors import Conflict, Forbidden, InvalidInput, ThreadNotFound
from studio.models import (
    AppendOnly,
    ApprovalDecision,
    AuditEntry,
    PurchaseOutbox,
    ReviewRequest,
    Run,
    Thread,
)
from studio.reviews import queue as review_queue
from studio.reviews.decisions import decide
from studio.reviews.governance import GovernedWrite
from studio.reviews.queue import pending_count, pending_for
from studio.services import runs
from studio.services.registered_graphs import runnable
from tests._support.reviews import PURCHASE_GRAPHS, decision, member, purchase, ruling
from tests._support.studio import serve_graphs
from tests._support.threads import checkpoint_id, checkpoints, drain

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs(PURCHASE_GRAPHS)


@pytest.fixture
def rita() -> User:
    return member("rita")


@pytest.fixture
def rex() -> User:
    return member("rex", "reviewers")


@pytest.fixture
def sam() -> User:
    return member("sam", "senior-reviewers")


def values(thread_id: str) -> dict[str, Any]:
    state = runnable("purchase").get_state({"configurable": {"thread_id": thread_id}})
    return dict(state.values)


def client_for(user: User, **options: Any) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


def paused_checkpoint(thread_id: str) -> str:
    return checkpoint_id(checkpoints("purchase", thread_id)[0])


# -- the reproduction: time travel cannot approve ---------------------------------------


FORGED = {
    "request_id": "PO-1001",
    "approval_version": 1,
    "decision_id": "d-1",
    "action": "approve",
    "reviewer": "ceo-forged",
}


@pytest.mark.parametrize("superuser", [False, True])
def test_fork_as_human_review_with_a_forged_decision_is_refused(
    superuser: bool,
) -> None:
    owner = member("boss", superuser=superuser)
    thread_id = purchase(owner, request_id="PO-1001").thread_id
    cp = paused_checkpoint(thread_id)
    saved = len(checkpoints("purchase", thread_id))

    response = client_for(owner).post(
        f"/threads/{thread_id}/checkpoints/{cp}/fork/",
        {
            "as_node": "human_review",
            "state.decision": '{"request_id":"PO-1001","approval_version":1,'
            '"decision_id":"d-1","action":"approve","reviewer":"ceo-forged"}',
            "run": "on",
        },
    )

    assert response.status_code == 422
    assert "only the reviewer console" in response.content.decode()
    drain()
    assert not PurchaseOutbox.objects.exists()
    assert len(checkpoints("purchase", thread_id)) == saved
    assert AuditEntry.objects.filter(
        action="governance.refused", thread_id=thread_id
    ).exists()


def test_fork_that_sets_budget_ok_on_an_over_budget_request_is_refused(
    rita: User,
) -> None:
    thread_id = purchase(rita, amount_minor=99_999_999).thread_id
    cp = paused_checkpoint(thread_id)

    response = client_for(rita).post(
        f"/threads/{thread_id}/checkpoints/{cp}/fork/",
        {"as_node": "budget", "state.budget_ok": "true", "run": "on"},
    )

    assert response.status_code == 422
    assert "budget_ok is protected" in response.content.decode()
    drain()
    assert values(thread_id)["budget_ok"] is False
    assert not PurchaseOutbox.objects.exists()


def test_a_resume_command_outside_the_console_is_refused_for_the_owner(
    rita: User,
) -> None:
    thread_id = purchase(rita).thread_id
    before = Run.objects.count()

    with pytest.raises(GovernedWrite, match="reviewer console"):
        runs.start_run(
            graph="purchase",
            user=rita,
            thread_id=thread_id,
            command={"resume": {**FORGED, "reviewer": "rita"}},
        )

    assert Run.objects.count() == before
    assert AuditEntry.objects.filter(action="governance.refused").count() == 1


def test_a_command_update_of_a_protected_key_is_refused(rita: User) -> None:
    thread_id = purchase(rita).thread_id

    with pytest.raises(GovernedWrite, match="decision is protected"):
        runs.start_run(
            graph="purchase",
            user=rita,
            thread_id=thread_id,
            command={"update": {"decision": {"action": "approve"}}, "goto": "execute"},
        )


def test_the_side_effect_trusts_the_ledger_not_the_state(rita: User) -> None:
    """Even state written behind the studio's back (the engine API) buys nothing."""
    thread_id = purchase(rita).thread_id
    request_id = values(thread_id)["request_id"]
    runnable("purchase").update_state(
        {"configurable": {"thread_id": thread_id}},
        {"decision": {**FORGED, "request_id": request_id, "reviewer": "ceo-forged"}},
        as_node="human_review",
    )

    runs.start_run(graph="purchase", user=rita, thread_id=thread_id)
    drain()

    state = values(thread_id)
    assert state["status"] == "rejected"
    assert "no level-1 approval" in state["result"]
    assert not PurchaseOutbox.objects.exists()
    refusal = AuditEntry.objects.get(action="purchase.refused")
    assert refusal.request_id == request_id


# -- the decision protocol --------------------------------------------------------------


def test_a_reviewer_approves_and_the_purchase_executes_once(
    rita: User, rex: User
) -> None:
    thread_id = purchase(rita, request_id="PO-7").thread_id

    outcome = ruling(rex, thread_id, decision("PO-7", decision_id="d-7"))

    assert outcome.final and outcome.run_id and not outcome.duplicate
    state = values(thread_id)
    assert state["status"] == "executed"
    assert "approved by rex" in state["result"]
    assert PurchaseOutbox.objects.get().request_id == "PO-7"
    row = ReviewRequest.objects.get(thread_id=thread_id)
    assert (row.status, row.outcome) == ("closed", "executed")
    assert (
        AuditEntry.objects.filter(action="review.approved", request_id="PO-7").count()
        == 1
    )
    assert AuditEntry.objects.filter(action="purchase.executed").count() == 1


def test_the_same_decision_id_again_returns_the_first_outcome(
    rita: User, rex: User
) -> None:
    thread_id = purchase(rita, request_id="PO-8").thread_id
    first = decide(rex, thread_id, decision("PO-8", decision_id="same"), strings=False)

    again = decide(rex, thread_id, decision("PO-8", decision_id="same"), strings=False)

    assert again.duplicate and again.run_id == first.run_id
    assert Run.objects.filter(thread_id=thread_id).count() == 2
    assert ApprovalDecision.objects.count() == 1


def test_a_conflicting_decision_says_who_decided(rita: User, rex: User) -> None:
    other = member("ria", "reviewers")
    thread_id = purchase(rita, request_id="PO-9").thread_id
    ruling(rex, thread_id, decision("PO-9"))

    with pytest.raises(Conflict, match="already approved at level 1 by rex"):
        decide(other, thread_id, decision("PO-9", "reject"), strings=False)

    assert ApprovalDecision.objects.count() == 1


def test_two_reviewers_at_once_exactly_one_wins(rita: User, rex: User) -> None:
    """The database constraint decides: a row for the version exists before the second insert."""
    other = member("ria", "reviewers")
    thread_id = purchase(rita, request_id="PO-10").thread_id
    # the second reviewer's row lands first, as if its transaction committed in between
    ApprovalDecision.objects.create(
        decision_id="d-racer",
        thread_id=thread_id,
        request_id="PO-10",
        approval_version=1,
        level=1,
        action="reject",
        reason="no",
        amount_minor=480_050,
        reviewer=other,
    )

    with pytest.raises(Conflict, match="rejected at level 1 by ria"):
        decide(rex, thread_id, decision("PO-10"), strings=False)

    assert ApprovalDecision.objects.filter(request_id="PO-10").count() == 1


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"reviewer_id": "ceo"}, "reviewer_id: set by the server"),
        ({"reviewer": "ceo"}, "reviewer: set by the server"),
        ({"approval_version": "1"}, "approval_version"),
        ({"action": True}, "action"),
        ({"action": "false"}, "action"),
        ({"approve": "false"}, "approve"),
        ({"extra": 1}, "extra"),
        ({"action": "reject", "reason": "  "}, "say why you reject"),
        ({"decision_id": "<script>"}, "decision_id"),
    ],
)
def test_invalid_decisions_are_refused_and_change_nothing(
    rita: User, rex: User, change: dict[str, Any], error: str
) -> None:
    thread_id = purchase(rita, request_id="PO-11").thread_id
    body = {**decision("PO-11"), **change}

    with pytest.raises(InvalidInput, match=re.escape(error)):
        decide(rex, thread_id, body, strings=False)

    assert not ApprovalDecision.objects.exists()
    assert Run.objects.filter(thread_id=thread_id).count() == 1
    assert AuditEntry.objects.filter(action="review.refused").count() == 1


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (decision("PO-12", version=2), "your decision was for PO-12 v2"),
        (decision("PO-OTHER"), "your decision was for PO-OTHER v1"),
    ],
)
def test_a_stale_version_or_another_request_is_refused(
    rita: User, rex: User, body: dict[str, Any], error: str
) -> None:
    thread_id = purchase(rita, request_id="PO-12").thread_id

    with pytest.raises(Conflict, match=re.escape(error)):
        decide(rex, thread_id, body, strings=False)

    assert not ApprovalDecision.objects.exists()


def test_the_requester_cannot_approve_their_own_request(rex: User) -> None:
    thread_id = purchase(rex, request_id="PO-13").thread_id

    with pytest.raises(Forbidden, match="segregation of duties"):
        decide(rex, thread_id, decision("PO-13"), strings=False)

    assert not ApprovalDecision.objects.exists()


def test_a_non_reviewer_cannot_see_the_review(rita: User) -> None:
    outsider = member("oscar")
    thread_id = purchase(rita, request_id="PO-14").thread_id

    with pytest.raises(ThreadNotFound):
        decide(outsider, thread_id, decision("PO-14"), strings=False)

    assert client_for(outsider).get(f"/reviews/{thread_id}/").status_code == 404
    assert client_for(outsider).get(f"/threads/{thread_id}/").status_code == 404


def test_a_failed_hard_check_stays_failed_after_an_approval(
    rita: User, rex: User
) -> None:
    sam = member("sam", "senior-reviewers")
    thread_id = purchase(rita, request_id="PO-15", amount_minor=12_000_000).thread_id

    ruling(rex, thread_id, decision("PO-15"))
    ruling(sam, thread_id, decision("PO-15"))

    state = values(thread_id)
    assert state["status"] == "rejected"
    assert "exceeds the limit" in state["result"]
    assert not PurchaseOutbox.objects.exists()


def test_replays_and_retries_after_the_approval_buy_once(rita: User, rex: User) -> None:
    thread_id = purchase(rita, request_id="PO-16").thread_id
    ruling(rex, thread_id, decision("PO-16"))
    reviewed = next(
        s for s in checkpoints("purchase", thread_id) if s.next == ("execute",)
    )

    for _ in range(2):
        client_for(rita).post(
            f"/threads/{thread_id}/checkpoints/{checkpoint_id(reviewed)}/replay/"
        )
        drain()

    outbox = PurchaseOutbox.objects.get()
    assert outbox.executions == 3
    assert AuditEntry.objects.filter(action="purchase.repeated").count() == 2


# -- multi-level approval ----------------------------------------------------------------


def test_above_the_threshold_a_senior_reviewer_approves_second(
    rita: User, rex: User, sam: User
) -> None:
    thread_id = purchase(rita, request_id="PO-20", amount_minor=7_250_000).thread_id

    first = ruling(rex, thread_id, decision("PO-20"))

    assert not first.final and not first.run_id
    assert "A senior reviewer must approve it too" in first.message
    assert values(thread_id).get("status") == "pending_review"
    assert ReviewRequest.objects.get(thread_id=thread_id).level == 2
    with pytest.raises(Forbidden, match="senior-reviewers"):
        decide(member("ria", "reviewers"), thread_id, decision("PO-20"), strings=False)

    second = ruling(sam, thread_id, decision("PO-20"))

    assert second.final and second.level == 2
    assert "approved by rex and sam" in values(thread_id)["result"]
    assert PurchaseOutbox.objects.count() == 1


def test_one_person_cannot_approve_both_levels(rita: User) -> None:
    both = member("bo", "reviewers", "senior-reviewers")
    thread_id = purchase(rita, request_id="PO-21", amount_minor=7_250_000).thread_id
    ruling(both, thread_id, decision("PO-21"))

    with pytest.raises(Forbidden, match="different reviewer"):
        decide(both, thread_id, decision("PO-21"), strings=False)
    assert pending_for(both) == [] and pending_count(both) == 0
    assert [r.request_id for r in pending_for(member("sam", "senior-reviewers"))] == [
        "PO-21"
    ]


def test_a_changed_request_needs_a_new_approval(rita: User, rex: User) -> None:
    thread_id = purchase(rita, request_id="PO-22", amount_minor=7_250_000).thread_id
    ruling(rex, thread_id, decision("PO-22"))
    runs.start_run(
        graph="purchase",
        user=rita,
        thread_id=thread_id,
        input={
            "request_id": "PO-22",
            "approval_version": 2,
            "amount_minor": 9_000_000,
            "vendor": "Acme",
            "category": "office",
        },
    )
    drain()

    with pytest.raises(Conflict, match="your decision was for PO-22 v1"):
        decide(
            member("sam", "senior-reviewers"),
            thread_id,
            decision("PO-22"),
            strings=False,
        )
    rows = dict(
        ReviewRequest.objects.filter(thread_id=thread_id).values_list(
            "approval_version", "status"
        )
    )
    assert rows == {1: "superseded", 2: "pending"}
    assert ReviewRequest.objects.get(approval_version=2).level == 1


# -- the pages ------------------------------------------------------------------------


def test_the_queue_lists_what_a_reviewer_may_decide(rita: User, rex: User) -> None:
    purchase(rita, request_id="PO-30", vendor="<b>Evil</b> Ltd")
    purchase(rex, request_id="PO-31")

    html = client_for(rex).get("/reviews/").content.decode()

    assert "PO-30" in html and "PO-31" not in html
    assert "&lt;b&gt;Evil&lt;/b&gt; Ltd" in html and "<b>Evil" not in html
    assert re.search(r'id="review-badge"[^>]*>1</span>', html)


def test_the_queue_is_for_reviewers_only(rita: User) -> None:
    assert client_for(rita).get("/reviews/").status_code == 403
    assert "/reviews/" not in client_for(rita).get("/purchases/").content.decode()


def test_the_decision_page_shows_the_request_and_posts_the_form(
    rita: User, rex: User
) -> None:
    thread_id = purchase(
        rita, request_id="PO-32", reason="<script>x</script>"
    ).thread_id
    client = client_for(rex)

    page = client.get(f"/reviews/{thread_id}/").content.decode()

    assert "4,800.50 CNY" in page and "&lt;script&gt;x&lt;/script&gt;" in page
    decision_id = re.search(r'name="decision_id" value="([^"]+)"', page).group(1)
    body = {
        "request_id": "PO-32",
        "approval_version": "1",
        "decision_id": decision_id,
        "action": "approve",
        "reason": "",
    }
    first = client.post(f"/reviews/{thread_id}/", body, follow=True)
    second = client.post(f"/reviews/{thread_id}/", body, follow=True)

    assert "Approved PO-32 v1 by rex" in first.content.decode()
    assert "This decision was already recorded" in second.content.decode()
    drain()
    assert values(thread_id)["status"] == "executed"


def test_the_decision_form_needs_csrf(rita: User, rex: User) -> None:
    thread_id = purchase(rita, request_id="PO-33").thread_id
    client = client_for(rex, enforce_csrf_checks=True)

    response = client.post(
        f"/reviews/{thread_id}/", {**decision("PO-33"), "approval_version": "1"}
    )

    assert response.status_code == 403
    assert not ApprovalDecision.objects.exists()


def test_a_forged_reviewer_in_the_form_is_refused(rita: User, rex: User) -> None:
    thread_id = purchase(rita, request_id="PO-34").thread_id

    response = client_for(rex).post(
        f"/reviews/{thread_id}/",
        {**decision("PO-34"), "approval_version": "1", "reviewer_id": "ceo"},
    )

    assert response.status_code == 422
    assert not ApprovalDecision.objects.exists()


def test_a_reviewer_reads_the_thread_but_cannot_travel_in_time(
    rita: User, rex: User
) -> None:
    thread_id = purchase(rita, request_id="PO-35").thread_id
    cp = paused_checkpoint(thread_id)
    client = client_for(rex)

    assert client.get(f"/threads/{thread_id}/").status_code == 200
    assert (
        client.post(f"/threads/{thread_id}/checkpoints/{cp}/replay/").status_code == 403
    )
    assert (
        client.post(
            f"/threads/{thread_id}/checkpoints/{cp}/fork/",
            {"as_node": "normalize", "state.reason": "x"},
        ).status_code
        == 403
    )


def test_the_audit_log_shows_decisions_and_refusals_and_exports_csv(
    rita: User, rex: User
) -> None:
    thread_id = purchase(rita, request_id="PO-40").thread_id
    with pytest.raises(InvalidInput):
        decide(rex, thread_id, {**decision("PO-40"), "reviewer": "x"}, strings=False)
    ruling(rex, thread_id, decision("PO-40", decision_id="d-40"))
    client = client_for(rex)

    html = client.get("/reviews/audit/?request=PO-40").content.decode()
    csv_text = b"".join(
        client.get("/reviews/audit/?request=PO-40&format=csv").streaming_content
    ).decode()

    for action in ("review.refused", "review.approved", "purchase.executed"):
        assert action in html and action in csv_text
    line = next(r for r in csv_text.splitlines() if "review.approved" in r)
    assert "d-40" in line and "approve" in line
    assert re.search(r",[0-9a-f]{64},", line)  # the hash of what rex was shown
    assert client_for(rita).get("/reviews/audit/").status_code == 403


def test_the_audit_log_is_append_only(rex: User) -> None:
    entry = AuditEntry.objects.create(actor=rex, action="review.approved")

    with pytest.raises(AppendOnly):
        entry.save()
    with pytest.raises(AppendOnly):
        entry.delete()
    with pytest.raises(AppendOnly):
        AuditEntry.objects.filter(pk=entry.pk).update(action="x")
    with pytest.raises(AppendOnly):
        AuditEntry.objects.all().delete()
    assert AuditEntry.objects.get().action == "review.approved"


def test_a_request_id_names_one_request(rita: User) -> None:
    purchase(rita, request_id="PO-50")

    with pytest.raises(Conflict, match="already used by another request"):
        runs.start_run(
            graph="purchase",
            user=member("mallory"),
            input={"request_id": "PO-50", "approval_version": 1, "amount_minor": 5},
        )


def test_a_retried_execute_buys_once(rita: User, rex: User) -> None:
    """The purchaser is idempotent by request id: a retry records a repeat, not a purchase."""
    from studio.reviews.ledger import purchase_once  # noqa: PLC0415

    thread_id = purchase(rita, request_id="PO-60").thread_id
    decide(rex, thread_id, decision("PO-60"), strings=False)  # the resume is not run
    order = {
        "request_id": "PO-60",
        "approval_version": 1,
        "amount_minor": 480_050,
        "vendor": "Acme",
        "category": "office",
        "items": [],
        "requester": "rita",
        "thread_id": thread_id,
        "levels_required": 1,
        "check_problems": [],
    }

    first, second = purchase_once(order), purchase_once(order)

    assert (first["duplicate"], second["duplicate"]) == (False, True)
    assert first["purchase_id"] == second["purchase_id"]
    assert PurchaseOutbox.objects.get().executions == 2
    assert purchase_once({**order, "amount_minor": 1}).get("refused")


def test_a_workers_sync_for_a_graph_no_reviewer_answers_reads_nothing(
    rita: User, django_assert_num_queries: Any
) -> None:
    thread = Thread.objects.create(graph="purchase", owner=rita)

    with django_assert_num_queries(0):  # not governed: nothing to read or keep
        review_queue.sync(thread.thread_id, "not-governed")
    with CaptureQueriesContext(connection) as governed:
        review_queue.sync(thread.thread_id, "purchase")
    assert '"studio_thread"' in governed.captured_queries[0]["sql"]  # read, kept
