"""Curated bad input against the pages and their forms (htmx or not).

Lists swept over every page and form: state values carrying HTML, script,
htmx attributes and template syntax (shown escaped, never as markup), forms
posted without the CSRF token (403, nothing written), another user's ids
against ids that do not exist (the same answer), addresses with odd ids, form
bodies of the wrong shape and of an oversize (a 4xx, never a 5xx, nothing
written). Rows are counted before and after each refused request.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils.html import escape

from studio.models import ApiToken, AuditEntry
from tests._support.studio import serve_graphs
from tests._support.threads import GRAPHS, checkpoint_id, checkpoints, run_now

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
_graphs = serve_graphs(GRAPHS)

TRIED = {"count": 0}
NOWHERE = "00000000-0000-4000-8000-000000000000"

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(1)>',
    "' onmouseover='alert(1)",
    '<div hx-get="/account/tokens/" hx-trigger="load">x</div>',
    '" hx-post="/accounts/logout/" hx-trigger="load" x="',
    '<a href="javascript:alert(1)">click</a>',
    "javascript:alert(1)",
    "{{ request.user.password }}",
    "{% csrf_token %}",
    "</textarea><script>alert(1)</script>",
    "<iframe srcdoc='<script>alert(1)</script>'>",
    "<style>body{display:none}</style>",
    "<!-- comment --><base href='//evil.example/'>",
]
"""State values as an attacker types them; ``RAW`` is what must never appear."""
RAW = re.compile(
    r"<script>alert|<img src=x|<svg onload|<div hx-get|<iframe|<style>body|<base href"
    r"|\bhx-post=\"/accounts|onmouseover='alert|href=\"javascript:|</textarea><script"
)


@pytest.fixture(scope="module", autouse=True)
def _tally() -> Iterator[None]:
    yield
    print(f"\ncurated page cases: {TRIED['count']} requests")


def _client(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def _send(
    client: Client, method: str, path: str, data: Any = None, **extra: Any
) -> Any:
    TRIED["count"] += 1
    response = getattr(client, method.lower())(path, data or {}, **extra)
    assert response.status_code < 500, (method, path, response.status_code)
    return response


def _rows() -> dict[str, int]:
    counts = {
        model.__name__: model.objects.count()
        for model in apps.get_app_config("studio").get_models()
    }
    counts["AuditEntry"] = AuditEntry.objects.exclude(
        action__endswith=".refused"
    ).count()
    counts["User"] = User.objects.count()
    return counts


class World:
    def __init__(self) -> None:
        self.ada = User.objects.create_user("ada", password="pw")
        self.bob = User.objects.create_user("bob", password="pw")
        self.rex = User.objects.create_user("rex", password="pw")
        self.rex.groups.add(Group.objects.get_or_create(name="reviewers")[0])
        self.thread = run_now(self.ada, "notes", {"title": "mine"}).thread_id
        self.theirs = run_now(self.bob, "notes", {"title": "theirs secret"}).thread_id
        self.checkpoint = checkpoint_id(checkpoints("notes", self.thread)[0])
        self.their_checkpoint = checkpoint_id(checkpoints("notes", self.theirs)[0])
        self.token = ApiToken.issue(self.ada, name="laptop")[0]


@pytest.fixture
def world(db: None) -> World:
    return World()


# -- hostile state values are shown escaped ------------------------------------------------


def _pages(thread_id: str, checkpoint: str) -> list[str]:
    return [
        "/threads/",
        f"/threads/{thread_id}/",
        f"/threads/{thread_id}/?partial=timeline",
        f"/threads/{thread_id}/compare/",
        f"/threads/{thread_id}/waterfall/",
        f"/threads/{thread_id}/checkpoints/{checkpoint}/",
        f"/threads/{thread_id}/checkpoints/{checkpoint}/fork/",
        f"/threads/{thread_id}/checkpoints/{checkpoint}/blame/?channel=title",
    ]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_hostile_state_values_are_shown_escaped_on_every_page(
    db: None, payload: str
) -> None:
    ada = User.objects.create_user("ada", password="pw")
    run = run_now(ada, "notes", {"title": payload})
    head = checkpoint_id(checkpoints("notes", run.thread_id)[0])
    client = _client(ada)

    shown = 0
    for path in _pages(run.thread_id, head):
        for htmx in ({}, {"HTTP_HX_REQUEST": "true"}):
            response = _send(client, "GET", path, **htmx)
            html = response.content.decode()
            assert not RAW.search(html), (path, RAW.search(html))
            shown += escape(payload)[:16] in html
    assert shown  # the value is on the pages (escaped), so the check saw it


def test_hostile_values_on_the_review_console_and_purchases_are_escaped(
    db: None,
) -> None:
    rita = User.objects.create_user("rita", password="pw")
    rex = User.objects.create_user("rex", password="pw")
    rex.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    payload = " ".join(PAYLOADS)[:1900]
    purchase = {
        "request_id": "R-1",
        "approval_version": 1,
        "amount_minor": 120_000,
        "vendor": PAYLOADS[1][:100],
        "reason": payload,
    }
    thread_id = run_now(rita, "purchase", purchase).thread_id

    pages = [
        (rex, "/reviews/"),
        (rex, f"/reviews/{thread_id}/"),
        (rex, "/reviews/audit/"),
        (rita, "/purchases/"),
        (rita, f"/threads/{thread_id}/"),
    ]
    for user, path in pages:
        html = _send(_client(user), "GET", path).content.decode()
        assert not RAW.search(html), (path, RAW.search(html))


def test_a_hostile_token_name_is_escaped(world: World) -> None:
    client = _client(world.ada)
    _send(client, "POST", "/account/tokens/", {"name": PAYLOADS[0][:60]})

    html = _send(client, "GET", "/account/tokens/").content.decode()

    assert not RAW.search(html)


# -- missing CSRF ---------------------------------------------------------------------------


def _forms(world: World) -> list[tuple[User, str, dict[str, Any]]]:
    t, c = world.thread, world.checkpoint
    return [
        (world.ada, "/graphs/notes/runs/", {"input.title": "x"}),
        (world.ada, "/graphs/notes/runs/", {"input": '{"title": "x"}'}),
        (world.ada, f"/threads/{t}/checkpoints/{c}/replay/", {}),
        (world.ada, f"/threads/{t}/checkpoints/{c}/fork/", {"state.title": "y"}),
        (
            world.ada,
            "/purchases/new/",
            {"amount": "1.00", "vendor": "A", "category": "office", "reason": "r"},
        ),
        (world.ada, "/account/tokens/", {"name": "x"}),
        (world.ada, f"/account/tokens/{world.token.pk}/revoke/", {}),
        (world.ada, "/accounts/logout/", {}),
        (
            world.rex,
            f"/reviews/{t}/",
            {
                "request_id": "R",
                "approval_version": "1",
                "decision_id": "d",
                "action": "approve",
            },
        ),
    ]


@pytest.mark.parametrize("htmx", [False, True])
def test_every_form_posted_without_its_csrf_token_is_403_and_writes_nothing(
    world: World, htmx: bool
) -> None:
    extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    for user, path, data in _forms(world):
        before = _rows()
        response = _send(_client(user, csrf=True), "POST", path, data, **extra)
        assert response.status_code == 403, path
        assert _rows() == before, path
    login = Client(enforce_csrf_checks=True)
    response = _send(
        login, "POST", "/accounts/login/", {"username": "ada", "password": "pw"}
    )
    assert response.status_code == 403
    assert "_auth_user_id" not in login.session


def test_a_wrong_or_foreign_csrf_token_is_403_too(world: World) -> None:
    client = _client(world.ada, csrf=True)
    client.get("/account/tokens/")
    other = _client(world.bob, csrf=True)
    other.get("/account/tokens/")
    tokens = ["x" * 64, other.cookies["csrftoken"].value, "", "<script>"]

    before = _rows()
    for token in tokens:
        response = _send(
            client,
            "POST",
            "/account/tokens/",
            {"name": "n", "csrfmiddlewaretoken": token},
        )
        assert response.status_code == 403
    assert _rows() == before


# -- another user's ids, ids that do not exist ------------------------------------------------


def _id_pages(thread: str, checkpoint: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("GET", f"/threads/{thread}/", {}),
        ("GET", f"/threads/{thread}/?partial=timeline", {}),
        ("GET", f"/threads/{thread}/compare/", {}),
        ("GET", f"/threads/{thread}/waterfall/", {}),
        ("GET", f"/threads/{thread}/checkpoints/{checkpoint}/", {}),
        ("GET", f"/threads/{thread}/checkpoints/{checkpoint}/blame/?channel=title", {}),
        ("GET", f"/threads/{thread}/checkpoints/{checkpoint}/fork/", {}),
        (
            "POST",
            f"/threads/{thread}/checkpoints/{checkpoint}/fork/",
            {"state.title": "z"},
        ),
        ("POST", f"/threads/{thread}/checkpoints/{checkpoint}/replay/", {}),
        ("GET", f"/reviews/{thread}/", {}),
        (
            "POST",
            f"/reviews/{thread}/",
            {
                "request_id": "R",
                "approval_version": "1",
                "decision_id": "d",
                "action": "approve",
            },
        ),
        ("GET", f"/purchases/{thread}/change/", {}),
        (
            "POST",
            f"/purchases/{thread}/change/",
            {"amount": "1.00", "vendor": "A", "category": "office", "reason": "r"},
        ),
    ]


def test_another_users_thread_answers_like_a_thread_that_does_not_exist(
    world: World,
) -> None:
    client = _client(world.ada)
    theirs = _id_pages(world.theirs, world.their_checkpoint)
    nobodys = _id_pages(NOWHERE, "1f000000-0000-6000-8000-000000000000")
    before = _rows()

    for (method, path, data), (_, nowhere, _) in zip(theirs, nobodys, strict=True):
        for htmx in ({}, {"HTTP_HX_REQUEST": "true"}):
            mine = _send(client, method, path, data, **htmx)
            none = _send(client, method, nowhere, data, **htmx)
            assert mine.status_code == none.status_code == 404, (
                path,
                mine.status_code,
                none.status_code,
            )
            assert "secret" not in mine.content.decode()
    assert _rows() == before


def test_my_thread_with_another_threads_checkpoint_is_not_found(world: World) -> None:
    client = _client(world.ada)
    before = _rows()

    for method, path, data in _id_pages(world.thread, world.their_checkpoint)[4:9]:
        response = _send(client, method, path, data)
        assert response.status_code == 404, path
        assert "secret" not in response.content.decode()
    assert _rows() == before


def test_another_users_token_cannot_be_revoked_or_told_apart(world: World) -> None:
    client = _client(world.bob)
    before = _rows()

    mine = _send(client, "POST", f"/account/tokens/{world.token.pk}/revoke/")
    none = _send(client, "POST", "/account/tokens/999999/revoke/")

    assert mine.status_code == none.status_code
    assert _rows() == before
    assert ApiToken.objects.filter(pk=world.token.pk).exists()


ODD_IDS = [
    "' OR 1=1 --",
    "<script>alert(1)</script>",
    "..%2F..%2Fetc%2Fpasswd",
    "%00",
    "x" * 3000,
    "\u202etxt.exe",
    "{{7*7}}",
    "1;DROP TABLE studio_thread",
]


@pytest.mark.parametrize("odd", ODD_IDS, ids=lambda s: repr(s)[:20])
def test_odd_ids_in_addresses_are_404_and_shown_escaped(world: World, odd: str) -> None:
    client = _client(world.ada)
    for path in (
        f"/threads/{odd}/",
        f"/threads/{world.thread}/checkpoints/{odd}/",
        f"/threads/{odd}/compare/",
        f"/reviews/{odd}/",
        f"/purchases/{odd}/change/",
        f"/graphs/{odd}/",
        f"/graphs/{odd}/graph.svg",
    ):
        response = _send(client, "GET", path)
        assert response.status_code in (400, 404), (path, response.status_code)
        assert not RAW.search(response.content.decode())


# -- form bodies of the wrong shape, and oversize -------------------------------------------


WRONG_FORMS: list[dict[str, Any]] = [
    {},
    {"input": ""},
    {"input": "[]"},
    {"input": "null"},
    {"input": '{"title": 1e400}'},
    {"input": '{"title": "x", "__class__": 1}'},
    {"input.title": ["a", "b"]},
    {"input.count": "99999999999999999999999999"},
    {"input.count": "NaN"},
    {"input.count": "-inf"},
    {"input.nope": "x", "user": "bob", "owner": "bob"},
    {"state.title": ["a", "b"]},
    {"state.count": "1e400"},
    {"state.tags": '{"a": 1e400}'},
    {"as_node": "<script>"},
    {"as_node": "nope"},
    {
        "approval_version": "1e400",
        "request_id": "R",
        "decision_id": "d",
        "action": "approve",
    },
    {
        "approval_version": "99999999999999999999",
        "request_id": "R",
        "decision_id": "d",
        "action": "approve",
    },
    {
        "approval_version": "1",
        "request_id": "R",
        "decision_id": "d",
        "action": "approve",
        "reviewer": "bob",
    },
    {"amount": "1e400", "vendor": "A", "category": "office", "reason": "r"},
    {"amount": "NaN", "vendor": "A", "category": "office", "reason": "r"},
    {"amount": "-1", "vendor": "A", "category": "office", "reason": "r"},
    {
        "amount": "99999999999999999999.99",
        "vendor": "A",
        "category": "office",
        "reason": "r",
    },
    {
        "amount": "1.00",
        "vendor": "A",
        "category": "office",
        "reason": "r",
        "requester": "bob",
    },
    {"name": ""},
    {"name": "x" * 10_000},
]


def test_form_bodies_of_the_wrong_shape_are_refused_without_a_5xx(world: World) -> None:
    ada, rex = _client(world.ada), _client(world.rex)
    targets = [
        (ada, "/graphs/notes/runs/"),
        (ada, f"/threads/{world.thread}/checkpoints/{world.checkpoint}/fork/"),
        (ada, f"/threads/{world.thread}/checkpoints/{world.checkpoint}/replay/"),
        (ada, "/purchases/new/"),
        (ada, "/account/tokens/"),
        (rex, f"/reviews/{world.thread}/"),
    ]
    for client, path in targets:
        for data in WRONG_FORMS:
            before = _rows()
            response = _send(client, "POST", path, data, HTTP_HX_REQUEST="true")
            if response.status_code < 400:
                continue  # a well-formed request for this form (its rows may change)
            assert response.status_code in (400, 403, 404, 409, 422), (path, data)
            assert _rows() == before, (path, data)


@pytest.mark.parametrize(
    "body",
    [
        {"input": "x" * (3 * 1024 * 1024)},
        {f"input.f{i}": "x" for i in range(2000)},
    ],
    ids=["3MB", "2000-fields"],
)
def test_an_oversize_form_is_refused_without_a_5xx(
    world: World, body: dict[str, Any]
) -> None:
    client = _client(world.ada)
    before = _rows()
    for path in (
        "/graphs/notes/runs/",
        f"/threads/{world.thread}/checkpoints/{world.checkpoint}/fork/",
        "/purchases/new/",
        "/account/tokens/",
    ):
        response = _send(client, "POST", path, body)
        assert response.status_code in (400, 413, 422), (path, response.status_code)
    assert _rows() == before
