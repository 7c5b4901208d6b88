"""The requester's pages: /purchases/ (my requests), /purchases/new/, change a request.

Runs are executed by a real worker (``Worker().run_once()``) on the purchase
graph; approvals go through the decision protocol (``studio.reviews.decisions``).

Server-set fields (``request_id``, ``approval_version``, ``requester``) sent in
the form are refused with 422 and nothing is queued (``studio.purchases.forms``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from studio.models import (
    AuditEntry,
    PurchaseOutbox,
    ReviewRequest,
    Run,
    RunEvent,
    Thread,
)
from studio.purchases import forms, services
from studio.reviews.decisions import decide
from studio.services import runs
from studio.services.worker import Worker
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs({"purchase": "studio.demo_graphs.purchase:build"})

VALID = {
    "amount": "480.50",
    "vendor": "Acme Office",
    "category": "office",
    "reason": "Chairs for the new team",
}


@pytest.fixture
def rex(db: None) -> User:
    reviewer = User.objects.create_user("rex", password="pw")
    reviewer.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    return reviewer


@pytest.fixture
def sam(db: None) -> User:
    senior = User.objects.create_user("sam", password="pw")
    senior.groups.add(Group.objects.get_or_create(name="senior-reviewers")[0])
    return senior


@pytest.fixture
def bob(db: None) -> User:
    return User.objects.create_user("bob", password="pw")


def submit(client: Client, **changes: str) -> Any:
    return client.post("/purchases/new/", {**VALID, **changes})


def submitted(client: Client, **changes: str) -> Run:
    """Post a valid request and run it to the review; returns its first run."""
    before = set(Run.objects.values_list("pk", flat=True))
    response = submit(client, **changes)
    assert response.status_code == 303, response.content.decode()
    (run,) = Run.objects.exclude(pk__in=before)
    assert Worker().run_once()
    run.refresh_from_db()
    return run


def approve(
    reviewer: User, run: Run, version: int = 1, decision_id: str = "d-1"
) -> None:
    decide(
        reviewer,
        run.thread_id,
        {
            "request_id": run.input["request_id"],
            "approval_version": version,
            "decision_id": decision_id,
            "action": "approve",
            "reason": "",
        },
        strings=False,
    )
    assert Worker().run_once()


def errors_of(html: str, dom_id: str) -> str:
    """The text of the error block shown next to the field ``dom_id``."""
    found = re.search(
        rf'<div class="field__errors" id="{re.escape(dom_id)}-errors">(.*?)</div>',
        html,
        re.S,
    )
    assert found, f"no errors shown next to {dom_id}"
    return found.group(1)


# -- the new request form -------------------------------------------------------------


def test_pages_need_a_signed_in_user(client: Client) -> None:
    for url in ("/purchases/", "/purchases/new/"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_new_form_marks_required_fields_and_hints_the_amount(signed_in: Client) -> None:
    html = signed_in.get("/purchases/new/").content.decode()

    assert "<h1>New purchase</h1>" in html
    assert "csrfmiddlewaretoken" in html
    assert "in CNY, e.g. 480.50" in html
    for name in ("amount", "vendor", "reason"):
        label = re.search(
            rf'<label class="field__label" for="purchase-{name}">(.*?)</label>',
            html,
            re.S,
        )
        assert label and '<span class="field__required">required</span>' in label.group(
            1
        )
    category = re.search(
        r'<label class="field__label" for="purchase-category">(.*?)</label>', html, re.S
    )
    assert category and "field__required" not in category.group(1)
    assert 'name="items-4-unit_price"' in html and 'name="items-5-sku"' not in html
    assert 'name="request_id"' not in html and 'name="requester"' not in html


def test_new_request_queues_one_run_with_a_server_id_and_the_signed_in_requester(
    signed_in: Client, ada: User
) -> None:
    before = Run.objects.count()

    response = submit(signed_in)

    assert response.status_code == 303 and response["Location"] == "/purchases/"
    assert Run.objects.count() == before + 1
    run = Run.objects.get()
    request_id = run.input["request_id"]
    assert re.fullmatch(r"PO-[0-9A-F]{8}", request_id)
    assert run.input == {
        "request_id": request_id,
        "approval_version": 1,
        "amount_minor": 48_050,
        "items": [],
        "vendor": "Acme Office",
        "category": "office",
        "reason": "Chairs for the new team",
    }
    assert run.created_by == ada and run.thread.owner == ada
    assert run.thread.metadata == {"request_id": request_id, "kind": "purchase"}
    assert AuditEntry.objects.filter(
        action="purchase.requested", request_id=request_id
    ).exists()

    assert Worker().run_once()

    event = RunEvent.objects.get(run=run, kind="interrupt")
    payload = event.payload["interrupts"][0]["value"]
    assert payload["requester"] == "ada"
    assert (payload["request_id"], payload["approval_version"]) == (request_id, 1)
    review = ReviewRequest.objects.get(thread=run.thread)
    assert review.requester == ada and review.amount_minor == 48_050

    page = signed_in.get("/purchases/").content.decode()
    assert f"Request {request_id} was submitted" in page
    assert "480.50 CNY" in page and "waiting for review" in page


def test_two_requests_get_different_ids(signed_in: Client) -> None:
    submit(signed_in)
    submit(signed_in)

    ids = {run.input["request_id"] for run in Run.objects.all()}
    assert len(ids) == 2


@pytest.mark.parametrize(
    ("amount", "message"),
    [
        ("abc", "Enter an amount in CNY"),
        ("0", "Must be more than 0"),
        ("0.00", "Must be more than 0"),
        ("1.234", "at most 2 decimals"),
        ("-5", "Must be more than 0"),
        ("1e3", "Enter an amount in CNY"),
        ("NaN", "Enter an amount in CNY"),
        ("", "This field is required."),
    ],
)
def test_invalid_amount_is_shown_next_to_the_field_and_queues_nothing(
    signed_in: Client, amount: str, message: str
) -> None:
    response = submit(signed_in, amount=amount)

    assert response.status_code == 422
    html = response.content.decode()
    assert message in errors_of(html, "purchase-amount")
    assert 'aria-invalid="true"' in html
    assert Run.objects.count() == 0 and Thread.objects.count() == 0


@pytest.mark.parametrize("field", ["vendor", "reason"])
def test_missing_required_text_is_refused(signed_in: Client, field: str) -> None:
    response = submit(signed_in, **{field: "   "})

    assert response.status_code == 422
    html = response.content.decode()
    assert "This field is required." in errors_of(html, f"purchase-{field}")
    assert 'value="480.50"' in html  # what was typed is kept
    assert Run.objects.count() == 0


def test_too_long_category_is_refused(signed_in: Client) -> None:
    response = submit(signed_in, category="x" * 65)

    assert response.status_code == 422
    assert "at most 64" in errors_of(response.content.decode(), "purchase-category")
    assert Run.objects.count() == 0


def test_items_that_do_not_add_up_are_refused(signed_in: Client) -> None:
    response = submit(
        signed_in,
        **{"items-0-sku": "CHAIR", "items-0-qty": "2", "items-0-unit_price": "200"},
    )

    assert response.status_code == 422
    html = response.content.decode()
    text = errors_of(html, "items")
    assert "add up to 400.00 CNY" in text and "480.50 CNY" in text
    assert Run.objects.count() == 0


def test_a_bad_item_row_is_shown_next_to_its_cell(signed_in: Client) -> None:
    response = submit(
        signed_in,
        **{"items-2-sku": "CHAIR", "items-2-qty": "1.5", "items-2-unit_price": ""},
    )

    assert response.status_code == 422
    html = response.content.decode()
    assert "Enter a whole number" in errors_of(html, "purchase-items-2-qty")
    assert "This field is required." in errors_of(html, "purchase-items-2-unit_price")
    assert Run.objects.count() == 0


def test_items_that_add_up_are_sent_in_fen(signed_in: Client) -> None:
    response = submit(
        signed_in,
        amount="480.50",
        **{
            "items-0-sku": "CHAIR",
            "items-0-qty": "2",
            "items-0-unit_price": "200.25",
            "items-3-sku": "DESK-LAMP",
            "items-3-qty": "1",
            "items-3-unit_price": "80",
        },
    )

    assert response.status_code == 303
    assert Run.objects.get().input["items"] == [
        {"sku": "CHAIR", "qty": 2, "unit_price_minor": 20_025},
        {"sku": "DESK-LAMP", "qty": 1, "unit_price_minor": 8_000},
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [("request_id", "PO-MINE"), ("requester", "mallory"), ("approval_version", "7")],
)
def test_server_set_fields_sent_by_the_client_are_refused(
    signed_in: Client, field: str, value: str
) -> None:
    response = submit(signed_in, **{field: value})

    assert response.status_code == 422
    assert f"{field}: set by the server" in response.content.decode()
    assert Run.objects.count() == 0


def test_unknown_fields_are_refused(signed_in: Client) -> None:
    response = submit(signed_in, **{"amount_minor": "1", "items-5-sku": "X"})

    assert response.status_code == 422
    html = response.content.decode()
    assert "Unknown field &#x27;amount_minor&#x27;" in html
    assert "Unknown field &#x27;items-5-sku&#x27;" in html
    assert Run.objects.count() == 0


def test_a_post_without_the_csrf_token_is_refused(ada: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)

    response = client.post("/purchases/new/", VALID)

    assert response.status_code == 403
    assert Run.objects.count() == 0


def test_amounts_become_fen_exactly() -> None:
    assert forms.to_minor("0.29") == 29  # a float would give 28.999...
    assert forms.to_minor("480.5") == 48_050
    assert forms.to_minor("999999999999.99") == 99_999_999_999_999
    assert forms.cny_text(48_050) == "480.50"
    assert forms.bind({**VALID, "amount": "1.10"}).draft.amount_minor == 110


# -- my requests ----------------------------------------------------------------------


def test_my_requests_lists_only_my_own(signed_in: Client, bob: User) -> None:
    mine = submitted(signed_in)
    bobs_client = Client()
    bobs_client.force_login(bob)
    theirs = submitted(bobs_client, vendor="Bob Supplies")

    html = signed_in.get("/purchases/").content.decode()

    assert mine.input["request_id"] in html
    assert theirs.input["request_id"] not in html and "Bob Supplies" not in html
    assert [r.request_id for r in services.my_requests(bob)] == [
        theirs.input["request_id"]
    ]


def test_my_requests_escapes_what_the_requester_typed(signed_in: Client) -> None:
    submitted(
        signed_in,
        vendor="<script>alert('v')</script>",
        reason="<script>alert('r')</script>",
    )

    html = signed_in.get("/purchases/").content.decode()

    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;v&#x27;)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(&#x27;r&#x27;)&lt;/script&gt;" in html


def test_an_executed_request_shows_its_decision_and_outcome(
    signed_in: Client, rex: User
) -> None:
    run = submitted(signed_in)
    approve(rex, run)

    (row,) = services.my_requests(run.created_by)
    html = signed_in.get("/purchases/").content.decode()

    assert (
        row.status == "executed" and "Bought 480.50 CNY from Acme Office" in row.outcome
    )
    assert [(d.reviewer, d.level, d.action) for d in row.decisions] == [
        ("rex", 1, "approve")
    ]
    assert not row.can_change
    assert "Bought 480.50 CNY" in html and "<strong>rex</strong>" in html
    assert f"/purchases/{run.thread_id}/change/" not in html


def test_a_rejected_request_shows_the_reason_and_can_be_changed(
    signed_in: Client, rex: User
) -> None:
    run = submitted(signed_in)
    decide(
        rex,
        run.thread_id,
        {
            "request_id": run.input["request_id"],
            "approval_version": 1,
            "decision_id": "d-no",
            "action": "reject",
            "reason": "Use the <b>framework</b> contract",
        },
        strings=False,
    )
    Worker().run_once()

    (row,) = services.my_requests(run.created_by)
    html = signed_in.get("/purchases/").content.decode()

    assert row.status == "rejected" and "Rejected by rex" in row.outcome
    assert "Use the &lt;b&gt;framework&lt;/b&gt; contract" in html
    assert f"/purchases/{run.thread_id}/change/" in html


def test_a_large_request_waits_for_a_senior_after_the_first_approval(
    signed_in: Client, rex: User, sam: User
) -> None:
    run = submitted(signed_in, amount="60000")
    decide(
        rex,
        run.thread_id,
        {
            "request_id": run.input["request_id"],
            "approval_version": 1,
            "decision_id": "d-first",
            "action": "approve",
            "reason": "",
        },
        strings=False,
    )

    (row,) = services.my_requests(run.created_by)
    assert row.status == "waiting for senior review" and row.amount == "60,000.00 CNY"

    approve(sam, run, decision_id="d-senior")
    (row,) = services.my_requests(run.created_by)
    assert row.status == "executed"
    assert [d.level for d in row.decisions] == [1, 2]


def test_a_failed_run_shows_its_error(ada: User) -> None:
    bad = {
        "request_id": "PO-BAD00001",
        "approval_version": 1,
        "amount_minor": 5,
        "requester": "x",
    }
    runs.start_run(
        graph="purchase",
        user=ada,
        input=bad,
        thread_metadata={"request_id": "PO-BAD00001"},
    )
    Worker().run_once()

    (row,) = services.my_requests(ada)

    assert row.status == "failed" and "requester" in row.outcome


def test_a_queued_request_shows_as_running(signed_in: Client, ada: User) -> None:
    submit(signed_in)

    (row,) = services.my_requests(ada)

    assert row.status == "running" and not row.can_change


# -- change a request -----------------------------------------------------------------


def test_change_creates_version_2_on_the_same_thread(signed_in: Client) -> None:
    first = submitted(
        signed_in,
        **{"items-0-sku": "CHAIR", "items-0-qty": "2", "items-0-unit_price": "240.25"},
    )
    request_id = first.input["request_id"]
    url = f"/purchases/{first.thread_id}/change/"

    page = signed_in.get(url).content.decode()
    assert f"Change request {request_id} (version 2)" in page
    assert 'value="480.50"' in page and 'value="Acme Office"' in page
    assert 'value="240.25"' in page and "Chairs for the new team</textarea>" in page

    response = signed_in.post(url, {**VALID, "amount": "450", "vendor": "Acme Outlet"})

    assert response.status_code == 303 and response["Location"] == "/purchases/"
    second = Run.objects.exclude(pk=first.pk).get()
    assert second.thread_id == first.thread_id
    assert second.input["request_id"] == request_id
    assert second.input["approval_version"] == 2
    assert second.input["amount_minor"] == 45_000 and second.input["items"] == []
    assert second.multitask_strategy == Run.Strategy.REJECT
    assert Thread.objects.count() == 1

    assert Worker().run_once()
    versions = dict(
        ReviewRequest.objects.filter(thread_id=first.thread_id).values_list(
            "approval_version", "status"
        )
    )
    assert versions == {1: "superseded", 2: "pending"}
    (row,) = services.my_requests(first.created_by)
    assert (row.approval_version, row.amount, row.vendor) == (
        2,
        "450.00 CNY",
        "Acme Outlet",
    )
    assert row.status == "waiting for review"
    follow = signed_in.get("/purchases/").content.decode()
    assert f"Request {request_id} version 2 was submitted" in follow


def test_the_old_version_cannot_be_approved_after_a_change(
    signed_in: Client, rex: User
) -> None:
    first = submitted(signed_in)
    signed_in.post(f"/purchases/{first.thread_id}/change/", {**VALID, "amount": "450"})
    Worker().run_once()

    from studio.errors import Conflict  # noqa: PLC0415 - only this test needs it

    with pytest.raises(Conflict, match="v2"):
        approve(rex, first, version=1)
    approve(rex, first, version=2, decision_id="d-2")

    outbox = PurchaseOutbox.objects.get(request_id=first.input["request_id"])
    assert (outbox.approval_version, outbox.amount_minor) == (2, 45_000)


def test_an_invalid_change_is_shown_again_and_queues_nothing(signed_in: Client) -> None:
    first = submitted(signed_in)
    url = f"/purchases/{first.thread_id}/change/"

    response = signed_in.post(
        url, {**VALID, "amount": "1.234", "approval_version": "9"}
    )

    assert response.status_code == 422
    html = response.content.decode()
    assert "Change request" in html and "(version 2)" in html
    assert "at most 2 decimals" in errors_of(html, "purchase-amount")
    assert "approval_version: set by the server" in html
    assert Run.objects.count() == 1


def test_another_user_cannot_change_my_request(signed_in: Client, bob: User) -> None:
    first = submitted(signed_in)
    bobs_client = Client()
    bobs_client.force_login(bob)
    url = f"/purchases/{first.thread_id}/change/"

    assert bobs_client.get(url).status_code == 404
    assert bobs_client.post(url, VALID).status_code == 404
    assert Run.objects.count() == 1


def test_a_reviewer_of_the_request_cannot_change_it(
    signed_in: Client, rex: User
) -> None:
    first = submitted(signed_in)
    reviewer = Client()
    reviewer.force_login(rex)

    response = reviewer.post(f"/purchases/{first.thread_id}/change/", VALID)

    assert response.status_code == 403
    assert Run.objects.count() == 1


def test_an_executed_request_cannot_be_changed(signed_in: Client, rex: User) -> None:
    first = submitted(signed_in)
    approve(rex, first)
    runs_before = Run.objects.count()
    url = f"/purchases/{first.thread_id}/change/"

    response = signed_in.post(url, {**VALID, "amount": "9"})

    assert response.status_code == 409
    assert "already executed" in response.content.decode()
    assert signed_in.get(url).status_code == 409
    assert Run.objects.count() == runs_before


def test_a_running_request_cannot_be_changed(signed_in: Client) -> None:
    submit(signed_in)
    run = Run.objects.get()

    response = signed_in.post(f"/purchases/{run.thread_id}/change/", VALID)

    assert response.status_code == 409
    assert "running right now" in response.content.decode()
    assert Run.objects.count() == 1
