"""Curated bad input against the JSON API, as an attacker or a broken client sends it.

Lists, each swept over the operations it concerns: bodies of the wrong type
and with extra fields, bodies too large, ids that do not exist against ids of
another user's thread, run and checkpoint (the answers must be the same: no
existence leak), identities forged in payloads (ignored or refused: the caller
is who the token says), and metadata filters written as injections. For every
case: no 5xx, and no row written when the request is refused (rows are
counted before and after, checkpoints included). ``test_api_fuzz.py`` sweeps
the same operations with generated requests; the existing per-operation tests
(``test_api_threads.py``, ``test_api_runs.py``) hold the behaviour of good ones.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, User

from studio.models import ApprovalDecision, AuditEntry, Run, Thread
from tests._support.api_calls import Api
from tests._support.studio import serve_graphs
from tests._support.threads import (
    GRAPHS,
    checkpoint_id,
    checkpoints,
    drain,
    run_now,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
_graphs = serve_graphs(GRAPHS)

TRIED = {"count": 0}
PURCHASE = {
    "request_id": "R-1",
    "approval_version": 1,
    "amount_minor": 120_000,
    "vendor": "Acme",
}
NOWHERE = "00000000-0000-4000-8000-000000000000"
"""A well-formed id that names nothing."""


@pytest.fixture(scope="module", autouse=True)
def _tally() -> Iterator[None]:
    yield
    print(f"\ncurated API cases: {TRIED['count']} requests")


class World:
    """ada (the caller) and bob, each with a notes thread waiting at ``review``."""

    def __init__(self) -> None:
        self.ada = User.objects.create_user("ada", password="pw")
        self.bob = User.objects.create_user("bob", password="pw")
        self.api = Api(self.ada)
        mine = run_now(self.ada, "notes", {"title": "mine"})
        theirs = run_now(self.bob, "notes", {"title": "theirs <b>secret</b>"})
        self.thread, self.run = mine.thread_id, str(mine.run_id)
        self.their_thread, self.their_run = theirs.thread_id, str(theirs.run_id)
        self.checkpoint = checkpoint_id(checkpoints("notes", self.thread)[0])
        self.their_checkpoint = checkpoint_id(
            checkpoints("notes", self.their_thread)[0]
        )
        self.their_checkpoints = len(checkpoints("notes", self.their_thread))

    def rows(self) -> dict[str, int]:
        """Every studio table's row count, and each thread's checkpoints."""
        counts = {
            model.__name__: model.objects.count()
            for model in apps.get_app_config("studio").get_models()
        }
        # Refusals of a governed write are audited on purpose (review.refused,
        # governance.refused): the one row a refused request adds.
        counts["AuditEntry"] = AuditEntry.objects.exclude(
            action__endswith=".refused"
        ).count()
        for thread in (self.thread, self.their_thread):
            counts[f"checkpoints:{thread}"] = len(checkpoints("notes", thread))
        return counts

    def call(self, method: str, path: str, body: Any = None, **extra: Any) -> Any:
        TRIED["count"] += 1
        response = self.api.call(method, path, body, **extra)
        assert response.status_code < 500, (method, path, response.content[:300])
        return response


@pytest.fixture
def world(db: None) -> World:
    return World()


# -- type confusion and extra fields ----------------------------------------------------

BODY_OPERATIONS = [
    ("POST", "/assistants/search"),
    ("POST", "/assistants/count"),
    ("POST", "/threads"),
    ("POST", "/threads/search"),
    ("POST", "/threads/count"),
    ("PATCH", "/threads/{t}"),
    ("POST", "/threads/{t}/state"),
    ("POST", "/threads/{t}/state/checkpoint"),
    ("POST", "/threads/{t}/history"),
    ("POST", "/threads/{t}/runs"),
    ("POST", "/threads/{t}/runs/wait"),
    ("POST", "/runs"),
    ("POST", "/reviews/{t}/decision"),
]
CONFUSED_BODIES: list[Any] = [
    "[]",
    '"a string"',
    "12",
    "null",
    "true",
    "{",
    '{"a": 1}garbage',
    b"\xff\xfe\x00",
    {"metadata": "x"},
    {"metadata": ["x"]},
    {"metadata": 1},
    {"values": "x"},
    {"values": [["title", "x"]]},
    {"limit": "10"},
    {"limit": True},
    {"limit": -1},
    {"limit": 10**30},
    {"offset": 1.5},
    {"thread_id": 12},
    {"thread_id": ["x"]},
    {"thread_id": "../../etc/passwd"},
    {"ids": "x"},
    {"ids": [1, 2]},
    {"ids": ["not-a-uuid", "' OR 1=1 --"]},
    {"assistant_id": 5},
    {"assistant_id": ["notes"]},
    {"assistant_id": {"$ne": None}},
    {"assistant_id": "notes", "input": "x", "command": "resume"},
    {"assistant_id": "notes", "command": {"resume": 1, "extra": 2}},
    {"assistant_id": "notes", "config": {"recursion_limit": "5"}},
    {"assistant_id": "notes", "config": {"recursion_limit": 10**20}},
    {"assistant_id": "notes", "after_seconds": -1},
    {"assistant_id": "notes", "after_seconds": 10**400},
    {"assistant_id": "notes", "checkpoint_id": 5},
    {"assistant_id": "notes", "stream_mode": "everything"},
    {"checkpoint": "abc"},
    {"checkpoint": {"checkpoint_id": 5}},
    {"checkpoint": {"checkpoint_ns": "sub"}},
    {"before": {"checkpoint_id": ["x"]}},
    {"as_node": 3, "values": {}},
    {"approval_version": "1", "request_id": 1, "decision_id": [], "action": "yes"},
    {
        "approval_version": 10**40,
        "request_id": "R",
        "decision_id": "d",
        "action": "approve",
    },
    {"unknown": 1},
    {"__proto__": {"admin": True}},
    {"constructor": {"prototype": {}}},
]


@pytest.mark.parametrize(("method", "path"), BODY_OPERATIONS)
def test_bodies_of_the_wrong_shape_are_refused_and_write_nothing(
    world: World, method: str, path: str
) -> None:
    address = path.replace("{t}", world.thread)
    before = world.rows()
    for body in CONFUSED_BODIES:
        response = world.call(method, address, body)
        if response.status_code < 300:
            # A few are well-formed for some operations (``{"metadata": 1}``
            # is not, ``{"unknown": 1}`` never is): those may only read.
            assert method == "POST" and path.endswith(("search", "count", "history"))
            continue
        assert response.status_code in (400, 404, 409, 413, 422), (body, response)
        assert response.json()["detail"]
    assert world.rows() == before


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e400", "-1E+999"])
@pytest.mark.parametrize(
    ("method", "path", "template"),
    [
        ("POST", "/threads/{t}/state", '{"values": {"title": %s}, "as_node": "draft"}'),
        ("POST", "/threads/{t}/runs", '{"assistant_id": "notes", "input": {"n": %s}}'),
        ("POST", "/threads", '{"metadata": {"n": %s}}'),
        ("PATCH", "/threads/{t}", '{"metadata": {"n": [%s]}}'),
    ],
)
def test_a_number_json_cannot_hold_is_422_and_writes_nothing(
    world: World, method: str, path: str, template: str, number: str
) -> None:
    # before: 1e400 was read as infinity and reached the database's JSON check
    before = world.rows()

    response = world.call(method, path.replace("{t}", world.thread), template % number)

    assert response.status_code == 422
    assert world.rows() == before


# -- oversize bodies ----------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), BODY_OPERATIONS)
@pytest.mark.parametrize("size", [1024 * 1024 + 1, 3 * 1024 * 1024, 20 * 1024 * 1024])
def test_an_oversize_body_is_413_and_writes_nothing(
    world: World, method: str, path: str, size: int
) -> None:
    body = '{"metadata": {"pad": "' + "x" * size + '"}}'
    before = world.rows()

    response = world.call(method, path.replace("{t}", world.thread), body)

    assert response.status_code == 413
    assert world.rows() == before


def test_a_body_larger_than_it_says_is_still_413(world: World) -> None:
    body = '{"metadata": {"pad": "' + "x" * (2 * 1024 * 1024) + '"}}'
    before = world.rows()

    response = world.call("POST", "/threads", body, CONTENT_LENGTH="20")

    assert response.status_code in (413, 422)
    assert world.rows() == before


# -- unknown ids and other users' ids: the same answer -----------------------------------

ID_OPERATIONS: list[tuple[str, str, Any]] = [
    ("GET", "/threads/{t}", None),
    ("PATCH", "/threads/{t}", {"metadata": {"x": 1}}),
    ("DELETE", "/threads/{t}", None),
    ("POST", "/threads/{t}/copy", None),
    ("GET", "/threads/{t}/state", None),
    ("POST", "/threads/{t}/state", {"values": {"title": "x"}, "as_node": "draft"}),
    ("GET", "/threads/{t}/state/{c}", None),
    ("POST", "/threads/{t}/state/checkpoint", {"checkpoint": {"checkpoint_id": "{c}"}}),
    ("POST", "/threads/{t}/history", {}),
    ("POST", "/threads/{t}/history", {"before": {"checkpoint_id": "{c}"}}),
    ("GET", "/threads/{t}/runs", None),
    ("POST", "/threads/{t}/runs", {"assistant_id": "notes", "input": {"title": "x"}}),
    ("GET", "/threads/{t}/runs/{r}", None),
    ("DELETE", "/threads/{t}/runs/{r}", None),
    ("GET", "/threads/{t}/runs/{r}/join", None),
    ("POST", "/threads/{t}/runs/{r}/cancel", None),
    ("GET", "/threads/{t}/runs/{r}/stream", None),
    (
        "POST",
        "/reviews/{t}/decision",
        {
            "request_id": "R",
            "approval_version": 1,
            "decision_id": "d",
            "action": "approve",
        },
    ),
]


def _fill(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, real in ids.items():
            value = value.replace("{" + key + "}", real)
        return value
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


def _answer(response: Any, ids: dict[str, str]) -> tuple[int, str]:
    text = response.content.decode()
    for key, real in ids.items():
        text = text.replace(real, "{" + key + "}")
    return response.status_code, text


@pytest.mark.parametrize(("method", "path", "body"), ID_OPERATIONS)
def test_another_users_ids_answer_exactly_like_ids_that_do_not_exist(
    world: World, method: str, path: str, body: Any
) -> None:
    theirs = {
        "t": world.their_thread,
        "r": world.their_run,
        "c": world.their_checkpoint,
    }
    nobodys = {"t": NOWHERE, "r": str(uuid.uuid4()), "c": str(uuid.uuid4())}
    before = world.rows()

    answers = [
        _answer(world.call(method, _fill(path, ids), _fill(body, ids)), ids)
        for ids in (theirs, nobodys)
    ]

    assert answers[0] == answers[1]
    assert answers[0][0] == 404
    assert world.rows() == before


CROSS_OPERATIONS: list[tuple[str, str, Any]] = [
    ("GET", "/threads/{t}/state/{c}", None),
    ("POST", "/threads/{t}/state/checkpoint", {"checkpoint": {"checkpoint_id": "{c}"}}),
    ("POST", "/threads/{t}/history", {"before": {"checkpoint_id": "{c}"}}),
    ("POST", "/threads/{t}/history", {"checkpoint": {"checkpoint_id": "{c}"}}),
    ("POST", "/threads/{t}/state", {"values": {"title": "x"}, "checkpoint_id": "{c}"}),
    ("GET", "/threads/{t}/runs/{r}", None),
    ("GET", "/threads/{t}/runs/{r}/join", None),
    ("POST", "/threads/{t}/runs/{r}/cancel", None),
    ("DELETE", "/threads/{t}/runs/{r}", None),
]


@pytest.mark.parametrize(("method", "path", "body"), CROSS_OPERATIONS)
def test_another_threads_run_or_checkpoint_under_my_thread_is_unknown(
    world: World, method: str, path: str, body: Any
) -> None:
    # My thread's address with bob's run or checkpoint id: as if the id were made up.
    theirs = {"t": world.thread, "r": world.their_run, "c": world.their_checkpoint}
    # a made-up checkpoint id that sorts like theirs (same time, other node part):
    # ``before`` is a cursor compared with ids, as in LangGraph, so an id of another
    # time would select other checkpoints of mine without revealing anything
    made_up = world.their_checkpoint[:-12] + uuid.uuid4().hex[:12]
    nobodys = {"t": world.thread, "r": str(uuid.uuid4()), "c": made_up}
    before = world.rows()

    answers = [
        _answer(world.call(method, _fill(path, ids), _fill(body, ids)), ids)
        for ids in (theirs, nobodys)
    ]

    assert answers[0] == answers[1]
    assert "secret" not in answers[0][1]
    assert world.rows() == before


def test_a_run_from_another_threads_checkpoint_is_a_run_from_nowhere(
    world: World,
) -> None:
    ended = []
    for checkpoint in (world.their_checkpoint, str(uuid.uuid4())):
        response = world.call(
            "POST",
            f"/threads/{world.thread}/runs",
            {
                "assistant_id": "notes",
                "command": {"resume": "ok"},
                "checkpoint_id": checkpoint,
            },
        )
        assert response.status_code in (200, 404, 409, 422)
        drain()
        if response.status_code == 200:
            run = Run.objects.get(pk=response.json()["run_id"])
            ended.append((response.status_code, run.status, run.error))
        else:
            ended.append((response.status_code, "", response.json()["detail"]))
    state = world.call("GET", f"/threads/{world.thread}/state").json()

    assert ended[0][:2] == ended[1][:2]
    assert "theirs" not in json.dumps(state)
    assert len(checkpoints("notes", world.their_thread)) == world.their_checkpoints


# -- forged identities ---------------------------------------------------------------------

FORGED = {
    "user": "bob",
    "user_id": 2,
    "owner": "bob",
    "created_by": "bob",
    "reviewer": "bob",
    "decided_by": "bob",
}


def test_identities_in_thread_metadata_do_not_change_the_owner(world: World) -> None:
    made = world.call("POST", "/threads", {"metadata": FORGED})
    patched = world.call("PATCH", f"/threads/{world.thread}", {"metadata": FORGED})

    assert made.status_code == patched.status_code == 200
    for thread_id in (made.json()["thread_id"], world.thread):
        assert Thread.objects.get(pk=thread_id).owner == world.ada
    assert world.call("GET", f"/threads/{made.json()['thread_id']}").status_code == 200
    assert Api(world.bob).get(f"/threads/{made.json()['thread_id']}").status_code == 404


@pytest.mark.parametrize(
    "where",
    [
        {"metadata": FORGED},
        {"context": FORGED},
        {"config": {"configurable": FORGED}},
        {"config": {"metadata": FORGED}},
    ],
)
def test_identities_in_a_run_do_not_change_who_runs_it(
    world: World, where: dict[str, Any]
) -> None:
    response = world.call(
        "POST",
        "/runs",
        {"assistant_id": "notes", "input": {"title": "x"}, **where},
    )

    assert response.status_code in (200, 422), response.json()
    if response.status_code == 200:
        run = Run.objects.get(pk=response.json()["run_id"])
        assert run.thread.owner == world.ada
        assert Api(world.bob).get(f"/threads/{run.thread_id}").status_code == 404


@pytest.mark.parametrize(
    "field", ["decided_by", "user", "user_id", "created_by", "owner", "level"]
)
def test_a_decision_naming_its_decider_is_refused(world: World, field: str) -> None:
    # (``reviewer`` and ``reviewer_id``: test_api_reviews.py)
    rex = User.objects.create_user("rex", password="pw")
    rex.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    waiting = run_now(world.ada, "purchase", PURCHASE).thread_id
    reviewer = Api(rex)
    before = world.rows()
    body = {
        "request_id": "R-1",
        "approval_version": 1,
        "decision_id": "d-1",
        "action": "approve",
        field: "bob",
    }

    response = reviewer.post(f"/reviews/{waiting}/decision", body)
    TRIED["count"] += 1

    assert response.status_code == 422
    assert field in response.json()["detail"]
    assert world.rows() == before
    assert not ApprovalDecision.objects.exists()


# -- metadata filters written as injections ------------------------------------------------

INJECTIONS: list[Any] = [
    {"a' OR 1=1 --": "x"},
    {"title": "' OR '1'='1"},
    {"$": 1},
    {"$.title": "theirs"},
    {"$[*]": 1},
    {"a.b": 1},
    {'a"]': 1},
    {"\\": 1},
    {"%": "%"},
    {"_": "_"},
    {"title": "%"},
    {"owner_id": 2},
    {"owner": {"$ne": None}},
    {"$where": "1 == 1"},
    {"graph_id": {"$ne": "x"}},
    {"graph_id": "%"},
    {"assistant_id": "' OR 1=1 --"},
    {"\u0000": 1},
    {"k": "\u0000"},
    {"k": 10**30},
    {"k": -(10**30)},
    {"k": 1e308},
    {"k": [1, {"$gt": 0}]},
    {"k": {"": {"": {}}}},
    {"x" * 5000: 1},
    {"__class__": 1},
    {"pk": 1},
    {"id": 1},
]


@pytest.mark.parametrize("metadata", INJECTIONS, ids=lambda m: repr(m)[:30])
def test_metadata_filters_find_only_my_threads_and_never_fail(
    world: World, metadata: dict[str, Any]
) -> None:
    before = world.rows()
    searched = world.call("POST", "/threads/search", {"metadata": metadata})
    counted = world.call("POST", "/threads/count", {"metadata": metadata})
    by_values = world.call("POST", "/threads/search", {"values": metadata})
    assistants = world.call("POST", "/assistants/search", {"metadata": metadata})
    history = world.call(
        "POST", f"/threads/{world.thread}/history", {"metadata": metadata}
    )

    for response in (searched, counted, by_values, assistants, history):
        assert response.status_code in (200, 404, 422), response.json()
    for response in (searched, by_values):
        if response.status_code == 200:
            assert {t["thread_id"] for t in response.json()} <= {world.thread}
    if history.status_code == 200:
        for state in history.json():
            assert state["checkpoint"]["thread_id"] == world.thread
    assert "secret" not in json.dumps(
        [r.json() for r in (searched, by_values, history)]
    )
    assert world.rows() == before
