"""``POST /api/reviews/<thread_id>/decision``: token and session auth, the strict body,
the decision protocol's answers as JSON, and the purchase it lets through."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client, override_settings

from studio.models import ApiToken, ApprovalDecision, PurchaseOutbox, ReviewRequest, Run
from studio.services import api_tokens, runs
from studio.services.registered_graphs import runnable
from studio.services.worker import Worker
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs({"purchase": "studio.demo_graphs.purchase:build"})

REQUEST = {
    "request_id": "R-1",
    "approval_version": 1,
    "amount_minor": 120_000,
    "vendor": "Acme",
}


@pytest.fixture
def requester() -> User:
    return User.objects.create_user("rita", password="x")


@pytest.fixture
def reviewer() -> User:
    user = User.objects.create_user("rev", password="x")
    group, _ = Group.objects.get_or_create(name="reviewers")
    user.groups.add(group)
    return user


@pytest.fixture
def waiting(requester: User, reviewer: User) -> str:
    """A purchase of 1,200 CNY by rita, waiting at ``human_review``: its thread id."""
    run = runs.start_run(graph="purchase", user=requester, input=REQUEST)
    Worker().run_once()
    return run.thread_id


def token_of(user: User) -> str:
    return ApiToken.issue(user)[1]


def decision(**changes: Any) -> dict[str, Any]:
    return {
        "request_id": "R-1",
        "approval_version": 1,
        "decision_id": "d-1",
        "action": "approve",
        "reason": "within budget",
        **changes,
    }


def url(thread_id: str) -> str:
    return f"/api/reviews/{thread_id}/decision"


def post(
    thread_id: str,
    body: Any,
    *,
    token: str | None = None,
    client: Client | None = None,
    **headers: str,
):
    if token is not None:
        headers.setdefault("x-api-key", token)
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    response = (client or Client()).post(
        url(thread_id), data=data, content_type="application/json", headers=headers
    )
    assert response["Content-Type"] == "application/json"
    return response


def state_status(thread_id: str) -> Any:
    snapshot = runnable("purchase").get_state(
        {"configurable": {"thread_id": thread_id}}
    )
    return snapshot.values.get("status")


def nothing_recorded(thread_id: str) -> bool:
    return (
        not ApprovalDecision.objects.exists()
        and Run.objects.filter(thread_id=thread_id).count() == 1
        and not PurchaseOutbox.objects.exists()
    )


@pytest.mark.parametrize("scheme", ["x-api-key", "bearer"])
def test_decision_approve_with_token_executes_the_purchase(
    waiting: str, reviewer: User, scheme: str
) -> None:
    secret = token_of(reviewer)
    headers = (
        {"x-api-key": secret}
        if scheme == "x-api-key"
        else {"authorization": f"Bearer {secret}"}
    )

    response = post(waiting, decision(), **headers)

    assert response.status_code == 201
    outcome = response.json()
    assert outcome["reviewer"] == "rev"
    assert outcome["action"] == "approve"
    assert outcome["duplicate"] is False and outcome["final"] is True
    assert outcome["run_id"]
    assert Worker().run_once()
    assert PurchaseOutbox.objects.filter(request_id="R-1").count() == 1
    assert state_status(waiting) == "executed"
    review = ReviewRequest.objects.get(thread_id=waiting, request_id="R-1")
    assert review.outcome == "executed"
    assert ApiToken.objects.get(user=reviewer).last_used_at is not None


def test_decision_same_decision_id_again_returns_the_first_outcome(
    waiting: str, reviewer: User
) -> None:
    secret = token_of(reviewer)
    first = post(waiting, decision(), token=secret)

    again = post(waiting, decision(), token=secret)

    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == {
        **first.json(),
        "duplicate": True,
        "message": "This decision was already recorded: " + first.json()["message"],
    }
    assert Run.objects.filter(thread_id=waiting).count() == 2
    assert ApprovalDecision.objects.count() == 1


def test_decision_other_decision_id_for_decided_version_names_who_decided(
    waiting: str, reviewer: User
) -> None:
    secret = token_of(reviewer)
    assert post(waiting, decision(), token=secret).status_code == 201
    Worker().run_once()

    response = post(
        waiting, decision(decision_id="d-2", action="reject", reason="no"), token=secret
    )

    assert response.status_code == 409
    assert "already approved" in response.json()["detail"]
    assert "by rev" in response.json()["detail"]
    assert ApprovalDecision.objects.count() == 1


@pytest.mark.parametrize("field", ["reviewer_id", "reviewer"])
def test_decision_client_sent_reviewer_is_refused(
    waiting: str, reviewer: User, field: str
) -> None:
    response = post(waiting, decision(**{field: "mallory"}), token=token_of(reviewer))

    assert response.status_code == 422
    assert field in response.json()["detail"]
    assert nothing_recorded(waiting)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"approval_version": "1"}, "approval_version"),
        ({"action": True}, "action"),
        ({"action": "maybe"}, "action"),
        ({"decision_id": "d 1/../x"}, "decision_id"),
        ({"amount_minor": 1}, "amount_minor"),
    ],
)
def test_decision_body_is_strict(
    waiting: str, reviewer: User, changes: dict[str, Any], named: str
) -> None:
    response = post(waiting, decision(**changes), token=token_of(reviewer))

    assert response.status_code == 422
    assert named in response.json()["detail"]
    assert nothing_recorded(waiting)


def test_decision_missing_field_is_422(waiting: str, reviewer: User) -> None:
    body = decision()
    del body["decision_id"]

    response = post(waiting, body, token=token_of(reviewer))

    assert response.status_code == 422
    assert "decision_id" in response.json()["detail"]


def test_decision_reject_without_reason_is_422(waiting: str, reviewer: User) -> None:
    response = post(
        waiting, decision(action="reject", reason="  "), token=token_of(reviewer)
    )

    assert response.status_code == 422
    assert "reason" in response.json()["detail"]
    assert nothing_recorded(waiting)


@pytest.mark.parametrize(
    "changes", [{"approval_version": 2}, {"request_id": "R-2"}], ids=["stale", "other"]
)
def test_decision_bound_to_the_waiting_request_and_version(
    waiting: str, reviewer: User, changes: dict[str, Any]
) -> None:
    response = post(waiting, decision(**changes), token=token_of(reviewer))

    assert response.status_code == 409
    assert "R-1 v1" in response.json()["detail"]
    assert nothing_recorded(waiting)


def test_decision_by_the_requester_is_403(waiting: str, requester: User) -> None:
    reviewers, _ = Group.objects.get_or_create(name="reviewers")
    requester.groups.add(reviewers)  # even a reviewer may not decide her own request

    response = post(waiting, decision(), token=token_of(requester))

    assert response.status_code == 403
    assert "someone else" in response.json()["detail"]
    assert nothing_recorded(waiting)


def test_decision_by_a_user_in_no_group_is_404(waiting: str) -> None:
    outsider = User.objects.create_user("olga", password="x")

    response = post(waiting, decision(), token=token_of(outsider))

    assert response.status_code == 404
    assert nothing_recorded(waiting)


def test_decision_on_unknown_thread_is_404(reviewer: User) -> None:
    response = post("no-such-thread", decision(), token=token_of(reviewer))

    assert response.status_code == 404
    assert response.json() == {"detail": "There is no thread 'no-such-thread'."}


def test_decision_with_revoked_token_is_401(waiting: str, reviewer: User) -> None:
    issued = api_tokens.issue(reviewer, "laptop")
    api_tokens.revoke(reviewer, issued.token.id)

    response = post(waiting, decision(), token=issued.secret)

    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid or revoked API token."}
    assert nothing_recorded(waiting)


@pytest.mark.parametrize(
    "headers",
    [
        {"x-api-key": "gs_not-a-token"},
        {"x-api-key": ""},
        {"authorization": "Bearer"},
        {"authorization": "Bearer gs_not-a-token"},
    ],
)
def test_decision_with_bad_token_is_401(waiting: str, headers: dict[str, str]) -> None:
    response = post(waiting, decision(), **headers)

    assert response.status_code == 401
    assert nothing_recorded(waiting)


def test_decision_token_wins_over_a_session(waiting: str, reviewer: User) -> None:
    client = Client()
    client.force_login(reviewer)

    response = post(waiting, decision(), client=client, **{"x-api-key": "gs_nope"})

    assert response.status_code == 401


def test_decision_two_different_tokens_are_401(waiting: str, reviewer: User) -> None:
    response = post(
        waiting,
        decision(),
        token=token_of(reviewer),
        authorization=f"Bearer {token_of(reviewer)}",
    )

    assert response.status_code == 401
    assert "different tokens" in response.json()["detail"]


def test_decision_without_auth_is_401(waiting: str) -> None:
    response = post(waiting, decision())

    assert response.status_code == 401
    assert response.json()["detail"].startswith("Authentication required")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert nothing_recorded(waiting)


def test_decision_inactive_users_token_is_401(waiting: str, reviewer: User) -> None:
    secret = token_of(reviewer)
    reviewer.is_active = False
    reviewer.save()

    response = post(waiting, decision(), token=secret)

    assert response.status_code == 401


@pytest.mark.parametrize(
    "body",
    [
        "{",
        "",
        "[]",
        '"approve"',
        "null",
        b"\xff\xfe{",
        '{"action": "reject", "action": "approve"}',
        '{"approval_version": NaN}',
        "[" * 100_000,
    ],
    ids=[
        "truncated",
        "empty",
        "list",
        "string",
        "null",
        "not-utf8",
        "repeated-key",
        "nan",
        "deep",
    ],
)
def test_decision_malformed_body_is_422(
    waiting: str, reviewer: User, body: str | bytes
) -> None:
    response = post(waiting, body, token=token_of(reviewer))

    assert response.status_code == 422
    assert response.json()["detail"]
    assert nothing_recorded(waiting)


def test_decision_body_any_content_type_if_json(waiting: str, reviewer: User) -> None:
    response = Client().post(
        url(waiting),
        data=json.dumps(decision()),
        content_type="text/plain",
        headers={"x-api-key": token_of(reviewer)},
    )

    assert response.status_code == 201


@override_settings(STUDIO_API_MAX_BODY_BYTES=100)
def test_decision_oversize_body_is_413(waiting: str, reviewer: User) -> None:
    response = post(waiting, decision(reason="x" * 200), token=token_of(reviewer))

    assert response.status_code == 413
    assert "100 bytes" in response.json()["detail"]
    assert nothing_recorded(waiting)


def test_decision_session_without_csrf_is_403(waiting: str, reviewer: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)

    response = post(waiting, decision(), client=client)

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert nothing_recorded(waiting)


def test_decision_session_with_csrf_is_201(waiting: str, reviewer: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    client.get("/account/tokens/")  # any page sets the CSRF cookie
    csrf = client.cookies["csrftoken"].value

    response = post(waiting, decision(), client=client, **{"x-csrftoken": csrf})

    assert response.status_code == 201
    assert response.json()["reviewer"] == "rev"


def test_decision_token_needs_no_csrf(waiting: str, reviewer: User) -> None:
    client = Client(enforce_csrf_checks=True)

    response = post(waiting, decision(), client=client, token=token_of(reviewer))

    assert response.status_code == 201


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_decision_other_methods_are_405(
    waiting: str, reviewer: User, method: str
) -> None:
    response = getattr(Client(), method)(
        url(waiting), headers={"x-api-key": token_of(reviewer)}
    )

    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert response["Content-Type"] == "application/json"
    assert "POST" in response.json()["detail"]


def test_unknown_api_address_is_json_404() -> None:
    response = Client().get("/api/nothing/here")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "detail" in response.json()
