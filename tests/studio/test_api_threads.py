"""``/api/threads/...``: threads, state, history and update_state with the reference's
shapes and status codes, the pages' permissions, and the console's governance.

Threads are made by real runs (``run_now``: the queue and a real worker)."""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from langgraph_sdk.errors import ConflictError, NotFoundError
from pydantic import TypeAdapter

from engine.graph import END, START, StateGraph
from engine.types import interrupt
from studio.api import schemas
from studio.errors import Conflict, GraphNotFound
from studio.models import AuditEntry, Run, RunEvent, Thread
from studio.reviews.decisions import decide
from studio.services import runs, thread_api
from studio.services.saver import get_saver
from tests._support.api_calls import Api, sdk_client, token_for
from tests._support.studio import serve_graphs
from tests._support.threads import GRAPHS, checkpoints, drain, run_now

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {
    "request_id": "R-1",
    "approval_version": 1,
    "amount_minor": 120_000,
    "vendor": "Acme",
}
THREAD_KEYS = {
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "status",
    "config",
    "values",
    "interrupts",
    "error",
}
STATE_KEYS = {
    "values",
    "next",
    "tasks",
    "metadata",
    "created_at",
    "checkpoint",
    "parent_checkpoint",
    "interrupts",
    "checkpoint_id",
    "parent_checkpoint_id",
}
TASK_KEYS = {
    "id",
    "name",
    "path",
    "error",
    "interrupts",
    "checkpoint",
    "state",
    "result",
}
NOTES_ID = str(uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "notes"))


class Log(TypedDict, total=False):
    text: str
    log: Annotated[list[str], operator.add]


def _prep(state: Log) -> dict[str, Any]:
    return {"log": ["prep"]}


def _ask(state: Log) -> dict[str, Any]:
    answer = interrupt({"question": "go?"})
    return {"log": [f"ask:{answer}"]}


def nested() -> Any:
    """prep -> sub (a subgraph whose ``ask`` interrupts)."""
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(Log)
    inner.add_node("ask", _ask)
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    outer: StateGraph[Any, Any, Any, Any] = StateGraph(Log)
    outer.add_node("prep", _prep)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "prep")
    outer.add_edge("prep", "sub")
    outer.add_edge("sub", END)
    return outer.compile(name="nested")


_graphs = serve_graphs({**GRAPHS, "nested": "tests.studio.test_api_threads:nested"})


@pytest.fixture
def api(ada: User) -> Api:
    return Api(ada)


@pytest.fixture
def bob() -> User:
    return User.objects.create_user("bob", password="pw")


@pytest.fixture
def rex() -> User:
    """A reviewer."""
    user = User.objects.create_user("rex", password="pw")
    group, _ = Group.objects.get_or_create(name="reviewers")
    user.groups.add(group)
    return user


@pytest.fixture
def notes(ada: User) -> str:
    """ada's notes thread, waiting at ``review``: its id."""
    return run_now(ada, "notes", {"title": "hello"}).thread_id


@pytest.fixture
def purchase(ada: User) -> str:
    """ada's purchase, waiting at ``human_review`` for a reviewer: its id."""
    return run_now(ada, "purchase", REQUEST).thread_id


def head_id(graph: str, thread_id: str) -> str:
    return str(checkpoints(graph, thread_id)[0].config["configurable"]["checkpoint_id"])


# -- create -------------------------------------------------------------------------------


def test_create_thread_is_idle_with_no_values(api: Api, ada: User) -> None:
    response = api.post("/threads", {"metadata": {"team": "finance"}})

    assert response.status_code == 200
    thread = response.json()
    assert set(thread) == THREAD_KEYS
    assert thread["status"] == "idle"
    assert thread["values"] is None
    assert thread["interrupts"] == {}
    assert thread["metadata"] == {"team": "finance"}
    assert thread["config"] == {} and thread["error"] is None
    assert uuid.UUID(thread["thread_id"])
    stored = Thread.objects.get(pk=thread["thread_id"])
    assert (stored.owner, stored.graph) == (ada, "")
    schemas.Thread.model_validate(thread)


def test_create_thread_with_a_graph_records_graph_and_assistant(api: Api) -> None:
    direct = api.post("/threads", {"graph_id": "notes"}).json()
    # what langgraph-sdk sends for threads.create(graph_id="notes")
    sdk_style = api.post("/threads", {"metadata": {"graph_id": "notes"}}).json()

    for thread in (direct, sdk_style):
        assert thread["metadata"] == {"graph_id": "notes", "assistant_id": NOTES_ID}
        assert Thread.objects.get(pk=thread["thread_id"]).graph == "notes"


def test_create_thread_with_an_unknown_graph_is_404(api: Api) -> None:
    response = api.post("/threads", {"graph_id": "nope"})

    assert response.status_code == 404
    assert response.json() == {"detail": "Graph 'nope' not found"}
    assert not Thread.objects.exists()


def test_create_thread_with_a_given_id_and_if_exists(api: Api) -> None:
    thread_id = str(uuid.uuid4())
    first = api.post("/threads", {"thread_id": thread_id, "metadata": {"n": 1}})

    again = api.post("/threads", {"thread_id": thread_id})
    kept = api.post(
        "/threads",
        {"thread_id": thread_id, "if_exists": "do_nothing", "metadata": {"n": 2}},
    )

    assert first.json()["thread_id"] == thread_id
    assert again.status_code == 409
    assert again.json() == {"detail": f"Thread {thread_id!r} already exists."}
    assert kept.status_code == 200
    assert kept.json() == first.json()  # the existing thread, unchanged


@pytest.mark.parametrize("if_exists", ["raise", "do_nothing"])
def test_create_thread_with_another_users_id_is_409_and_reveals_nothing(
    ada: User, bob: User, if_exists: str
) -> None:
    thread_id = (
        Api(bob).post("/threads", {"metadata": {"secret": "b"}}).json()["thread_id"]
    )

    response = Api(ada).post(
        "/threads", {"thread_id": thread_id, "if_exists": if_exists}
    )

    assert response.status_code == 409
    assert response.json() == {"detail": f"Thread {thread_id!r} already exists."}
    assert Thread.objects.get(pk=thread_id).metadata == {"secret": "b"}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"thread_id": "not-a-uuid"}, "thread_id"),
        ({"if_exists": "update"}, "if_exists"),
        ({"metadata": "x"}, "metadata"),
        ({"metadata": {"request_id": "PO-1"}}, "request_id"),
        ({"graph_id": "notes", "metadata": {"graph_id": "purchase"}}, "different"),
        ({"supersteps": []}, "supersteps"),
        ("{", "not valid JSON"),
    ],
)
def test_create_thread_refuses_bad_bodies_and_writes_nothing(
    api: Api, body: Any, problem: str
) -> None:
    response = api.post("/threads", body)

    assert response.status_code == 422
    assert problem in response.json()["detail"]
    assert not Thread.objects.exists()


def test_threads_need_authentication() -> None:
    response = Api(token="").post("/threads", {})

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'


def test_session_callers_need_the_csrf_token(ada: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)

    refused = client.post("/api/threads", "{}", content_type="application/json")
    read = client.post("/api/threads/search", "{}", content_type="application/json")

    assert refused.status_code == 403
    assert read.status_code == 403  # POST is unsafe, whatever it does
    assert client.get(f"/api/threads/{uuid.uuid4()}").status_code == 404


# -- get and the thread's JSON ---------------------------------------------------------


def test_thread_after_a_run_shows_values_interrupts_and_graph(
    api: Api, notes: str
) -> None:
    thread = api.get(f"/threads/{notes}").json()

    assert thread["status"] == "interrupted"
    assert thread["values"]["title"] == "hello"
    assert thread["values"]["log"] == ["draft:hello"]
    [(task_id, interrupts)] = thread["interrupts"].items()
    assert interrupts == [
        {"id": interrupts[0]["id"], "value": {"question": "Publish?", "title": "hello"}}
    ]
    assert thread["metadata"]["graph_id"] == "notes"
    assert thread["metadata"]["assistant_id"] == NOTES_ID
    assert thread["state_updated_at"] >= thread["created_at"]
    schemas.Thread.model_validate(thread)


def test_thread_of_a_failed_run_shows_its_error(api: Api, ada: User) -> None:
    thread_id = run_now(ada, "broken", {"text": "x"}).thread_id

    thread = api.get(f"/threads/{thread_id}").json()

    assert thread["status"] == "error"
    assert thread["error"]["error"] and thread["error"]["message"]


def test_get_thread_unknown_is_404(api: Api) -> None:
    response = api.get(f"/threads/{uuid.uuid4()}")

    assert response.status_code == 404
    assert "no thread" in response.json()["detail"]


# -- other users and reviewers ------------------------------------------------------------

OTHER_USERS_PATHS = [
    ("GET", "", None),
    ("PATCH", "", {"metadata": {"x": 1}}),
    ("DELETE", "", None),
    ("POST", "/copy", None),
    ("GET", "/state", None),
    ("GET", "/state/{checkpoint}", None),
    ("POST", "/state/checkpoint", {"checkpoint": {"checkpoint_id": "{checkpoint}"}}),
    ("POST", "/state", {"values": {"title": "x"}, "as_node": "draft"}),
    ("POST", "/history", {}),
]


def _fill(value: Any, checkpoint: str) -> Any:
    if isinstance(value, str):
        return value.replace("{checkpoint}", checkpoint)
    if isinstance(value, dict):
        return {k: _fill(v, checkpoint) for k, v in value.items()}
    return value


@pytest.mark.parametrize(("method", "suffix", "body"), OTHER_USERS_PATHS)
def test_another_users_thread_is_404_on_every_path(
    bob: User, notes: str, method: str, suffix: str, body: Any
) -> None:
    before = head_id("notes", notes)
    path = f"/threads/{notes}{_fill(suffix, before)}"

    response = Api(bob).call(method, path, _fill(body, before))

    assert response.status_code == 404
    assert notes in response.json()["detail"]
    assert head_id("notes", notes) == before
    assert Thread.objects.filter(pk=notes).exists()


def test_another_users_thread_is_not_in_search(bob: User, notes: str) -> None:
    assert Api(bob).post("/threads/search", {}).json() == []
    assert Api(bob).post("/threads/count", {}).json() == 0


def test_reviewer_reads_the_governed_thread_they_review(
    rex: User, purchase: str
) -> None:
    api = Api(rex)

    thread = api.get(f"/threads/{purchase}")
    state = api.get(f"/threads/{purchase}/state")
    history = api.post(f"/threads/{purchase}/history", {})
    found = api.post("/threads/search", {"metadata": {"graph_id": "purchase"}})

    assert thread.status_code == state.status_code == history.status_code == 200
    assert state.json()["next"] == ["human_review"]
    assert [t["thread_id"] for t in found.json()] == [purchase]


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("PATCH", "", {"metadata": {"x": 1}}),
        ("DELETE", "", None),
        ("POST", "/copy", None),
        ("POST", "/state", {"values": {"reason": "x"}, "as_node": "normalize"}),
    ],
)
def test_reviewer_may_not_change_the_thread(
    rex: User, purchase: str, method: str, suffix: str, body: Any
) -> None:
    before = head_id("purchase", purchase)

    response = Api(rex).call(method, f"/threads/{purchase}{suffix}", body)

    assert response.status_code == 403
    assert "reviewer console" in response.json()["detail"]
    assert head_id("purchase", purchase) == before
    assert Thread.objects.filter(pk=purchase).count() == 1


# -- search -----------------------------------------------------------------------------------


def test_search_by_metadata_containment(api: Api, ada: User) -> None:
    finance = api.post(
        "/threads", {"metadata": {"team": "finance", "tags": ["a", "b"], "n": 1}}
    ).json()["thread_id"]
    api.post("/threads", {"metadata": {"team": "legal", "tags": ["b"], "n": True}})
    notes = run_now(ada, "notes", {"title": "t"}).thread_id

    def ids(metadata: dict[str, Any]) -> list[str]:
        found = api.post("/threads/search", {"metadata": metadata}).json()
        return [t["thread_id"] for t in found]

    assert ids({"team": "finance"}) == [finance]
    assert ids({"tags": ["a"]}) == [finance]
    assert len(ids({"tags": ["b"]})) == 2
    assert ids({"n": 1}) == [finance]  # true is not 1
    assert ids({"team": "finance", "tags": ["c"]}) == []
    assert ids({"graph_id": "notes"}) == [notes]
    assert ids({"assistant_id": NOTES_ID}) == [notes]
    assert ids({"missing": None}) == []
    nothing = api.post("/threads", {"metadata": {"nothing": None}}).json()["thread_id"]
    assert ids({"nothing": None}) == [nothing]


def test_search_by_status_values_ids_and_order(api: Api, ada: User) -> None:
    idle = api.post("/threads", {}).json()["thread_id"]
    waiting = run_now(ada, "notes", {"title": "first"}).thread_id
    other = run_now(ada, "notes", {"title": "second"}).thread_id

    def ids(**body: Any) -> list[str]:
        response = api.post("/threads/search", body)
        assert response.status_code == 200, response.json()
        TypeAdapter(list[schemas.Thread]).validate_python(response.json())
        return [t["thread_id"] for t in response.json()]

    assert ids() == [other, waiting, idle]  # created_at, newest first
    assert ids(sort_by="created_at", sort_order="asc") == [idle, waiting, other]
    assert ids(status="interrupted") == [other, waiting]
    assert ids(status="idle") == [idle]
    assert ids(values={"title": "first"}) == [waiting]
    assert ids(values={"log": ["draft:second"]}) == [other]
    assert ids(ids=[idle, other]) == [other, idle]
    assert ids(status="busy") == []


def test_search_pages_with_limit_offset_and_select(api: Api) -> None:
    made = [api.post("/threads", {"metadata": {"i": i}}).json() for i in range(3)]

    first = api.post("/threads/search", {"limit": 2, "sort_order": "asc"})
    last = api.post("/threads/search", {"limit": 2, "offset": 2, "sort_order": "asc"})
    nested = api.post(
        "/threads/search",
        {"limit": 1, "offset": 1, "sort_order": "asc", "metadata": {"i": 1}},
    )
    selected = api.post("/threads/search", {"select": ["thread_id", "status"]})

    assert [t["thread_id"] for t in first.json() + last.json()] == [
        t["thread_id"] for t in made
    ]
    assert first["X-Pagination-Next"] == "2"
    assert not last.has_header("X-Pagination-Next")
    assert nested.json() == []
    assert set(selected.json()[0]) == {"thread_id", "status"}
    assert api.post("/threads/count", {}).json() == 3


@pytest.mark.parametrize(
    "body",
    [{"status": "done"}, {"limit": "10"}, {"limit": 0}, {"sort_by": "x"}, {"ids": "a"}],
)
def test_search_refuses_bad_filters(api: Api, body: Any) -> None:
    assert api.post("/threads/search", body).status_code == 422


# -- patch, delete, copy ----------------------------------------------------------------


def test_patch_merges_metadata(api: Api) -> None:
    thread_id = api.post("/threads", {"metadata": {"a": 1, "b": 2}}).json()["thread_id"]

    response = api.patch(f"/threads/{thread_id}", {"metadata": {"b": 3, "c": 4}})

    assert response.status_code == 200
    assert response.json()["metadata"] == {"a": 1, "b": 3, "c": 4}
    assert Thread.objects.get(pk=thread_id).metadata == {"a": 1, "b": 3, "c": 4}


def test_patch_may_bind_a_graph_but_never_change_it(api: Api) -> None:
    thread_id = api.post("/threads", {}).json()["thread_id"]

    bound = api.patch(f"/threads/{thread_id}", {"metadata": {"graph_id": "notes"}})
    changed = api.patch(f"/threads/{thread_id}", {"metadata": {"graph_id": "purchase"}})
    server_key = api.patch(f"/threads/{thread_id}", {"metadata": {"request_id": "R"}})

    assert bound.json()["metadata"]["assistant_id"] == NOTES_ID
    assert (
        changed.status_code == 422 and "cannot be changed" in changed.json()["detail"]
    )
    assert server_key.status_code == 422
    assert Thread.objects.get(pk=thread_id).graph == "notes"


def test_patch_needs_metadata(api: Api) -> None:
    thread_id = api.post("/threads", {}).json()["thread_id"]

    assert api.patch(f"/threads/{thread_id}", {}).status_code == 422
    assert api.patch(f"/threads/{thread_id}", {"metadata": [1]}).status_code == 422


def test_delete_removes_checkpoints_runs_and_events(api: Api, notes: str) -> None:
    saver = get_saver()
    config = {"configurable": {"thread_id": notes, "checkpoint_ns": ""}}
    assert saver.get_tuple(config) is not None
    assert RunEvent.objects.filter(thread_id=notes).exists()

    response = api.delete(f"/threads/{notes}")

    assert response.status_code == 204
    assert response.content == b""
    assert saver.get_tuple(config) is None
    assert not Thread.objects.filter(pk=notes).exists()
    assert not Run.objects.filter(thread_id=notes).exists()
    assert not RunEvent.objects.filter(thread_id=notes).exists()
    assert api.get(f"/threads/{notes}").status_code == 404
    assert AuditEntry.objects.filter(action="thread.deleted", thread_id=notes).exists()


def test_delete_refuses_a_thread_with_an_active_run(api: Api, ada: User) -> None:
    run = runs.start_run(
        graph="notes", user=ada, input={"title": "t"}, after_seconds=60
    )

    response = api.delete(f"/threads/{run.thread_id}")

    assert response.status_code == 409
    assert "pending or running" in response.json()["detail"]
    assert Run.objects.filter(pk=run.pk).exists()


def test_delete_keeps_a_governed_thread_with_decisions(
    api: Api, rex: User, purchase: str
) -> None:
    decide(
        rex,
        purchase,
        {
            "request_id": "R-1",
            "approval_version": 1,
            "decision_id": "d-1",
            "action": "approve",
            "reason": "ok",
        },
        strings=False,
    )
    drain()

    response = api.delete(f"/threads/{purchase}")

    assert response.status_code == 409
    assert "ledger" in response.json()["detail"]
    assert Thread.objects.filter(pk=purchase).exists()
    assert get_saver().get_tuple({"configurable": {"thread_id": purchase}}) is not None


def test_copy_has_the_same_history(api: Api, ada: User, notes: str) -> None:
    response = api.post(f"/threads/{notes}/copy")

    assert response.status_code == 200
    copy = response.json()
    assert copy["thread_id"] != notes
    assert copy["values"] == api.get(f"/threads/{notes}").json()["values"]
    assert copy["status"] == "interrupted"
    assert copy["metadata"]["graph_id"] == "notes"
    original = api.post(f"/threads/{notes}/history", {"limit": 100}).json()
    copied = api.post(f"/threads/{copy['thread_id']}/history", {"limit": 100}).json()
    assert [s["checkpoint_id"] for s in copied] == [
        s["checkpoint_id"] for s in original
    ]
    assert [s["values"] for s in copied] == [s["values"] for s in original]
    assert {s["checkpoint"]["thread_id"] for s in copied} == {copy["thread_id"]}
    assert Thread.objects.get(pk=copy["thread_id"]).owner == ada


def test_copy_of_a_new_thread_and_of_a_governed_one(api: Api, purchase: str) -> None:
    empty = api.post("/threads", {"metadata": {"k": "v"}}).json()["thread_id"]

    copied = api.post(f"/threads/{empty}/copy")
    governed = api.post(f"/threads/{purchase}/copy")

    assert copied.status_code == 200 and copied.json()["metadata"] == {"k": "v"}
    assert governed.status_code == 409
    assert "request id names one request" in governed.json()["detail"]
    assert Thread.objects.count() == 3


# -- state ------------------------------------------------------------------------------------


def test_state_at_an_interrupt(api: Api, notes: str) -> None:
    response = api.get(f"/threads/{notes}/state")

    assert response.status_code == 200
    state = response.json()
    assert set(state) == STATE_KEYS
    assert state["next"] == ["review"]
    [task] = state["tasks"]
    assert set(task) == TASK_KEYS
    assert task["name"] == "review"
    assert task["interrupts"][0]["value"] == {"question": "Publish?", "title": "hello"}
    assert state["interrupts"] == task["interrupts"]
    assert state["checkpoint"] == {
        "thread_id": notes,
        "checkpoint_ns": "",
        "checkpoint_id": state["checkpoint_id"],
    }
    assert state["parent_checkpoint"]["checkpoint_id"] == state["parent_checkpoint_id"]
    assert state["metadata"]["step"] == 1
    assert state["metadata"]["source"] == "loop"
    assert state["values"]["log"] == ["draft:hello"]
    schemas.ThreadState.model_validate(state)


def test_state_at_the_purchase_interrupt(api: Api, purchase: str) -> None:
    state = api.get(f"/threads/{purchase}/state").json()

    assert state["next"] == ["human_review"]
    assert state["tasks"][0]["interrupts"][0]["value"]["request_id"] == "R-1"
    assert state["interrupts"] == state["tasks"][0]["interrupts"]


def test_state_of_a_new_thread_is_empty(api: Api) -> None:
    thread_id = api.post("/threads", {}).json()["thread_id"]
    bound = api.post("/threads", {"graph_id": "notes"}).json()["thread_id"]

    for tid in (thread_id, bound):
        state = api.get(f"/threads/{tid}/state").json()
        assert state["values"] == {} and state["next"] == [] and state["tasks"] == []
        assert state["checkpoint"] is None and state["metadata"] is None
        assert api.post(f"/threads/{tid}/history", {}).json() == []


def test_state_at_a_checkpoint_by_path_and_by_body(api: Api, notes: str) -> None:
    history = api.post(f"/threads/{notes}/history", {}).json()
    older = history[1]

    by_path = api.get(f"/threads/{notes}/state/{older['checkpoint_id']}")
    by_body = api.post(
        f"/threads/{notes}/state/checkpoint",
        {"checkpoint": older["checkpoint"], "subgraphs": False},
    )

    assert by_path.status_code == by_body.status_code == 200
    assert by_path.json() == by_body.json()
    assert by_path.json()["checkpoint"] == older["checkpoint"]
    assert by_path.json()["values"] == older["values"]


def test_state_at_an_unknown_checkpoint_is_404(api: Api, notes: str) -> None:
    unknown = api.get(f"/threads/{notes}/state/1f0-not-here")
    malformed = api.get(f"/threads/{notes}/state/..%2F..")

    assert unknown.status_code == 404
    assert "no checkpoint" in unknown.json()["detail"]
    assert malformed.status_code == 404


@pytest.mark.parametrize(
    ("checkpoint", "problem"),
    [
        ({"thread_id": "other", "checkpoint_id": "x"}, "thread_id"),
        ({"checkpoint_ns": "sub:1", "checkpoint_id": "x"}, "checkpoint_ns"),
        ({"checkpoint_id": 7}, "checkpoint_id"),
        ({"checkpoint_id": "x", "colour": "red"}, "colour"),
    ],
)
def test_state_at_checkpoint_refuses_bad_addresses(
    api: Api, notes: str, checkpoint: dict[str, Any], problem: str
) -> None:
    response = api.post(
        f"/threads/{notes}/state/checkpoint", {"checkpoint": checkpoint}
    )

    assert response.status_code == 422
    assert problem in response.json()["detail"]


def test_state_with_subgraphs(api: Api, ada: User) -> None:
    thread_id = run_now(ada, "nested", {"text": "x"}).thread_id

    flat = api.get(f"/threads/{thread_id}/state").json()
    deep = api.get(f"/threads/{thread_id}/state", subgraphs="true").json()

    assert flat["next"] == ["sub"]
    assert flat["tasks"][0]["state"] is None
    assert flat["tasks"][0]["checkpoint"]["checkpoint_ns"].startswith("sub:")
    inner = deep["tasks"][0]["state"]
    assert inner["next"] == ["ask"]
    assert inner["tasks"][0]["interrupts"][0]["value"] == {"question": "go?"}
    schemas.ThreadState.model_validate(deep)


# -- history ------------------------------------------------------------------------------


def test_history_is_newest_first_with_parent_links(api: Api, purchase: str) -> None:
    response = api.post(f"/threads/{purchase}/history", {})

    assert response.status_code == 200
    history = response.json()
    assert [s["metadata"]["step"] for s in history] == [2, 1, 0, -1]
    assert history[-1]["metadata"]["source"] == "input"
    assert history[-1]["parent_checkpoint"] is None
    for newer, older in zip(history, history[1:], strict=False):
        assert newer["parent_checkpoint"] == older["checkpoint"]
        assert newer["parent_checkpoint_id"] == older["checkpoint_id"]
    TypeAdapter(list[schemas.ThreadState]).validate_python(history)


def test_history_limit_before_metadata_and_checkpoint(api: Api, notes: str) -> None:
    everything = api.post(f"/threads/{notes}/history", {"limit": 100}).json()
    second = everything[1]

    limited = api.post(f"/threads/{notes}/history", {"limit": 2}).json()
    before_id = api.post(
        f"/threads/{notes}/history", {"before": second["checkpoint_id"]}
    ).json()
    before_checkpoint = api.post(
        f"/threads/{notes}/history", {"before": second["checkpoint"]}
    ).json()
    inputs = api.post(
        f"/threads/{notes}/history", {"metadata": {"source": "input"}}
    ).json()
    only = api.post(
        f"/threads/{notes}/history", {"checkpoint": second["checkpoint"]}
    ).json()

    assert limited == everything[:2]
    assert before_id == before_checkpoint == everything[2:]
    assert [s["metadata"]["step"] for s in inputs] == [-1]
    assert [s["checkpoint_id"] for s in only] == [second["checkpoint_id"]]


def test_history_refuses_bad_bodies(api: Api, notes: str) -> None:
    for body in ({"limit": "10"}, {"limit": 0}, {"before": 5}, {"select": ["values"]}):
        assert api.post(f"/threads/{notes}/history", body).status_code == 422


# -- update_state ---------------------------------------------------------------------------


def test_update_state_as_a_node(api: Api, notes: str) -> None:
    before = api.get(f"/threads/{notes}/state").json()

    response = api.post(
        f"/threads/{notes}/state", {"values": {"title": "edited"}, "as_node": "review"}
    )

    assert response.status_code == 200
    result = response.json()
    new_id = result["checkpoint_id"]
    assert result["checkpoint"] == {
        "thread_id": notes,
        "checkpoint_ns": "",
        "checkpoint_id": new_id,
    }
    assert result["configurable"] == result["checkpoint"]
    schemas.StateUpdateResult.model_validate(result)
    head = api.get(f"/threads/{notes}/state").json()
    assert head["checkpoint_id"] == new_id
    assert head["metadata"]["source"] == "update"
    assert head["metadata"]["step"] == before["metadata"]["step"] + 1
    assert head["parent_checkpoint_id"] == before["checkpoint_id"]
    assert head["values"]["title"] == "edited"
    assert head["next"] == ["publish"]
    thread = api.get(f"/threads/{notes}").json()
    assert thread["status"] == "interrupted"  # the head has nodes to run
    edit = AuditEntry.objects.get(action="thread.fork", thread_id=notes)
    assert edit.detail["values"] == {"title": "edited"}
    assert edit.detail["checkpoint_id"] == new_id


def test_update_state_from_a_past_checkpoint_forks(api: Api, notes: str) -> None:
    history = api.post(f"/threads/{notes}/history", {}).json()
    past = history[1]

    response = api.post(
        f"/threads/{notes}/state",
        {
            "values": {"title": "other"},
            "as_node": "draft",
            "checkpoint": past["checkpoint"],
        },
    )

    assert response.status_code == 200
    head = api.get(f"/threads/{notes}/state").json()
    assert head["parent_checkpoint_id"] == past["checkpoint_id"]
    assert head["metadata"]["step"] == past["metadata"]["step"] + 1


def test_ambiguous_update_without_as_node_is_400(api: Api, ada: User) -> None:
    thread_id = run_now(ada, "open_purchase", REQUEST).thread_id
    before = head_id("open_purchase", thread_id)

    response = api.post(f"/threads/{thread_id}/state", {"values": {"reason": "r"}})

    assert response.status_code == 400
    assert response.json()["detail"].startswith("Ambiguous update, specify as_node")
    assert head_id("open_purchase", thread_id) == before


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"values": {"reason": "ok"}, "as_node": "human_review"}, "human_review"),
        ({"values": {"budget_ok": True}, "as_node": "budget"}, "budget_ok"),
        ({"values": {"budget_ok": True}}, "budget_ok"),
    ],
)
def test_governed_update_state_is_refused_for_everyone_and_audited(
    ada: User, purchase: str, body: dict[str, Any], why: str
) -> None:
    ada.is_superuser = True
    ada.save()
    before = head_id("purchase", purchase)

    response = Api(ada).post(f"/threads/{purchase}/state", body)

    assert response.status_code == 403
    detail = response.json()["detail"]
    assert "governed by the reviewer console" in detail and why in detail
    assert head_id("purchase", purchase) == before
    refusal = AuditEntry.objects.get(action="governance.refused")
    assert refusal.detail["attempted"] == "thread.update_state"
    assert refusal.thread_id == purchase


def test_update_state_engine_refusals(api: Api, notes: str) -> None:
    unknown_node = api.post(
        f"/threads/{notes}/state", {"values": {"title": "x"}, "as_node": "nope"}
    )
    unknown_key = api.post(
        f"/threads/{notes}/state", {"values": {"colour": "x"}, "as_node": "draft"}
    )
    unknown_checkpoint = api.post(
        f"/threads/{notes}/state",
        {"values": {"title": "x"}, "as_node": "draft", "checkpoint_id": "1f0-gone"},
    )
    bad_values = api.post(f"/threads/{notes}/state", {"values": ["title"]})

    assert unknown_node.status_code == 400 and "nope" in unknown_node.json()["detail"]
    assert unknown_key.status_code == 400 and "colour" in unknown_key.json()["detail"]
    assert unknown_checkpoint.status_code == 404
    assert bad_values.status_code == 422
    assert not AuditEntry.objects.filter(action="thread.fork").exists()


def test_update_state_of_a_busy_thread_or_one_without_graph_is_409(
    api: Api, ada: User
) -> None:
    busy = runs.start_run(
        graph="notes", user=ada, input={"title": "t"}, after_seconds=60
    ).thread_id
    unbound = api.post("/threads", {}).json()["thread_id"]

    for thread_id in (busy, unbound):
        response = api.post(
            f"/threads/{thread_id}/state",
            {"values": {"title": "x"}, "as_node": "draft"},
        )
        assert response.status_code == 409


# -- the runs resource's hooks ------------------------------------------------------------


def test_create_thread_and_bind_graph_for_the_runs_resource(ada: User) -> None:
    thread = thread_api.create_thread(ada, metadata={"k": 1})
    assert thread.graph == ""

    thread_api.bind_graph(thread, "notes")
    thread_api.bind_graph(thread, "notes")  # idempotent

    stored = Thread.objects.get(pk=thread.thread_id)
    assert stored.graph == "notes"
    assert stored.metadata == {"k": 1, "graph_id": "notes", "assistant_id": NOTES_ID}
    with pytest.raises(Conflict):
        thread_api.bind_graph(thread, "research")
    with pytest.raises(GraphNotFound):
        thread_api.bind_graph(thread, "nope")
    run = runs.start_run(graph="notes", user=ada, thread_id=thread.thread_id)
    assert run.thread_id == thread.thread_id


def test_pages_list_threads_that_have_no_graph_yet(api: Api, ada: User) -> None:
    thread_id = api.post("/threads", {}).json()["thread_id"]
    client = Client()
    client.force_login(ada)

    listed = client.get("/threads/")
    page = client.get(f"/threads/{thread_id}/")

    assert listed.status_code == 200 and thread_id in listed.content.decode()
    # until its first run binds a graph the thread has no history: a 404 that says so
    assert page.status_code == 404
    assert "its first run will say which graph it follows" in page.content.decode()


# -- the official client -------------------------------------------------------------------


def test_langgraph_sdk_drives_threads(ada: User, bob: User) -> None:
    client = sdk_client(token_for(ada))
    notes = run_now(ada, "notes", {"title": "sdk"}).thread_id

    made = client.threads.create(metadata={"via": "sdk"}, graph_id="notes")
    found = client.threads.search(metadata={"via": "sdk"})
    updated = client.threads.update(made["thread_id"], metadata={"more": 1})
    state = client.threads.get_state(notes)
    history = client.threads.get_history(notes, limit=2)
    at = client.threads.get_state(notes, checkpoint_id=history[1]["checkpoint_id"])
    written = client.threads.update_state(notes, {"title": "sdk2"}, as_node="review")
    copied = client.threads.copy(notes)
    client.threads.delete(made["thread_id"])

    assert [t["thread_id"] for t in found] == [made["thread_id"]]
    assert updated["metadata"]["more"] == 1
    assert state["next"] == ["review"]
    assert len(history) == 2 and at["checkpoint_id"] == history[1]["checkpoint_id"]
    assert client.threads.get_state(notes)["checkpoint_id"] == written["checkpoint_id"]
    assert copied["thread_id"] != notes
    with pytest.raises(NotFoundError):
        client.threads.get(made["thread_id"])
    with pytest.raises(ConflictError):
        client.threads.create(thread_id=notes)
    with pytest.raises(NotFoundError):
        sdk_client(token_for(bob)).threads.get_state(notes)


def test_update_state_while_another_writer_holds_the_thread_is_409_and_writes_nothing(
    api: Api, ada: User
) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    before = len(checkpoints("notes", thread_id))
    saver = get_saver()
    saver.acquire_lease(thread_id, "", "another-process", 30)
    try:
        response = api.post(
            f"/threads/{thread_id}/state",
            {"values": {"title": "x"}, "as_node": "draft"},
        )
    finally:
        saver.release_lease(thread_id, "", "another-process")

    assert response.status_code == 409
    assert "pending or running" in response.json()["detail"]
    assert len(checkpoints("notes", thread_id)) == before
    assert not AuditEntry.objects.filter(action="thread.fork").exists()
