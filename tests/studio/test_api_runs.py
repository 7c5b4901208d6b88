"""The runs resource of the Agent Server protocol under ``/api/``: every path, status
code and error, the SSE frames in the reference's order, reconnecting with
``Last-Event-ID``, stateless runs, multitask strategies, and the governance rules
(no runs path lets a requester's token cause a purchase).

Runs execute in a real ``Worker`` (``drain()``), never in the request: a test
queues through the API, drains, then reads the streamed body, which is an async
iterator (``read()`` collects it the way Daphne would, on an event loop).
"""

from __future__ import annotations

import json
import operator
import threading
import uuid
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client, override_settings

from engine.config import get_stream_writer
from engine.graph import START, StateGraph
from studio.models import (
    ApiToken,
    ApprovalDecision,
    AuditEntry,
    PurchaseOutbox,
    Run,
    RunEvent,
    Thread,
)
from studio.services.activity import activity
from studio.services.registered_graphs import runnable
from studio.services.runs import sweep_temporary_threads
from tests._support.reviews import member
from tests._support.studio import serve_graphs
from tests._support.threads import checkpoints, drain

pytestmark = pytest.mark.django_db(transaction=True)

PURCHASE_ASSISTANT = "ff2c5b94-ed56-55ab-b444-e28b4ff8af58"
BUSY = (
    "Thread is already running a task. Wait for it to finish or choose a different "
    "multitask strategy."
)


# -- graphs served to these tests -------------------------------------------------


class Steps(TypedDict, total=False):
    text: str
    log: Annotated[list[str], operator.add]


def _step(name: str) -> Callable[[Steps], dict[str, Any]]:
    def node(state: Steps) -> dict[str, Any]:
        if name == "a":
            get_stream_writer()({"progress": "a"})
        if state.get("text") == "fail" and name == "b":
            raise ValueError("b failed on purpose")
        return {"log": [name]}

    return node


def steps() -> Any:
    """START -> a (writes a custom chunk) -> b (fails when text == "fail")."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Steps)
    builder.add_node("a", _step("a"))
    builder.add_node("b", _step("b"))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    return builder.compile()


def nested() -> Any:
    """START -> outer -> child (a subgraph: c1 -> c2)."""
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(Steps)
    inner.add_node("c1", _step("c1"))
    inner.add_node("c2", _step("c2"))
    inner.add_edge(START, "c1")
    inner.add_edge("c1", "c2")
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Steps)
    builder.add_node("outer", _step("outer"))
    builder.add_node("child", inner.compile())
    builder.add_edge(START, "outer")
    builder.add_edge("outer", "child")
    return builder.compile()


_graphs = serve_graphs(
    {
        "purchase": "studio.demo_graphs.purchase:build",
        "steps": "tests.studio.test_api_runs:steps",
        "nested": "tests.studio.test_api_runs:nested",
        "slow": "tests.studio.engine_graphs_for_tests:slow",
    }
)


# -- people and their clients ------------------------------------------------------


@pytest.fixture
def rita() -> User:
    """A requester: in no group."""
    return member("rita")


@pytest.fixture
def rex() -> User:
    """A reviewer."""
    return member("rex", "reviewers")


def api(user: User) -> Client:
    """A client that sends ``user``'s personal API token, as the SDK does."""
    return Client(HTTP_X_API_KEY=ApiToken.issue(user)[1])


@pytest.fixture
def client_of(rita: User) -> Client:
    return api(rita)


def post(client: Client, path: str, body: Any = None, **headers: Any) -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body or {})
    return client.post(
        f"/api{path}", data=data, content_type="application/json", **headers
    )


def read(response: Any) -> bytes:
    """A streamed body, collected on an event loop (as Daphne iterates it)."""

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()


def body_json(response: Any) -> Any:
    return json.loads(read(response))


def frames(response: Any) -> list[tuple[str | None, str, Any]]:
    """SSE frames as ``(id, event, data)``."""
    found = []
    for block in read(response).decode().split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        found.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
    return found


def events(response: Any) -> list[tuple[str, Any]]:
    return [(event, data) for _, event, data in frames(response)]


def purchase_input(request_id: str = "PO-1", amount_minor: int = 480_050) -> dict:
    return {
        "request_id": request_id,
        "approval_version": 1,
        "amount_minor": amount_minor,
        "vendor": "Acme",
        "category": "office",
    }


def new_thread(owner: User, graph: str = "") -> str:
    """A thread as ``POST /api/threads`` leaves it: no graph until its first run."""
    return Thread.objects.create(owner=owner, graph=graph).thread_id


def finished_steps_run(client: Client, owner: User, text: str) -> str:
    """A thread whose ``steps`` run, queued through the API, has finished."""
    thread_id = new_thread(owner)
    post(
        client,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": text}},
    )
    drain()
    return thread_id


def waiting_purchase(client: Client, request_id: str = "PO-1", **input: Any) -> str:
    """A purchase paused at ``human_review``, started through the API: its thread."""
    response = post(
        client,
        "/runs",
        {
            "assistant_id": "purchase",
            "input": {**purchase_input(request_id), **input},
            "on_completion": "keep",
        },
    )
    assert response.status_code == 200, response.content
    drain()
    return str(response.json()["thread_id"])


def decision(request_id: str = "PO-1", **changes: Any) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "approval_version": 1,
        "decision_id": f"d-{uuid.uuid4().hex[:8]}",
        "action": "approve",
        "reason": "",
        **changes,
    }


# -- create, get, list --------------------------------------------------------------


def test_create_answers_the_run_and_queues_it(client_of: Client, rita: User) -> None:
    thread_id = new_thread(rita)

    response = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {
            "assistant_id": PURCHASE_ASSISTANT,
            "input": purchase_input(),
            "metadata": {"source": "test"},
            "config": {"recursion_limit": 30, "tags": ["t"]},
        },
    )

    assert response.status_code == 200
    run = response.json()
    assert set(run) == {
        "run_id",
        "thread_id",
        "assistant_id",
        "metadata",
        "status",
        "kwargs",
        "multitask_strategy",
        "created_at",
        "updated_at",
    }
    assert run["thread_id"] == thread_id
    assert run["assistant_id"] == PURCHASE_ASSISTANT
    assert run["status"] == "pending"
    assert run["metadata"] == {"source": "test"}
    assert run["multitask_strategy"] == "enqueue"
    assert run["kwargs"]["input"] == purchase_input()
    assert run["kwargs"]["config"] == {"recursion_limit": 30, "tags": ["t"]}
    assert run["kwargs"]["stream_mode"] == ["values"]
    assert response["Content-Location"] == f"/threads/{thread_id}/runs/{run['run_id']}"
    thread = Thread.objects.get(pk=thread_id)
    assert thread.graph == "purchase" and thread.status == Thread.Status.BUSY
    assert thread.metadata["assistant_id"] == PURCHASE_ASSISTANT
    assert thread.metadata["graph_id"] == "purchase"

    drain()

    got = client_of.get(f"/api/threads/{thread_id}/runs/{run['run_id']}")
    assert got.status_code == 200
    assert got.json()["status"] == "success"  # stopped at interrupt(): success
    assert Thread.objects.get(pk=thread_id).status == Thread.Status.INTERRUPTED


def test_assistant_id_is_the_graph_name_or_its_uuid(
    client_of: Client, rita: User
) -> None:
    by_name = post(
        client_of,
        f"/threads/{new_thread(rita)}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}},
    )
    unknown = post(
        client_of,
        f"/threads/{new_thread(rita)}/runs",
        {"assistant_id": str(uuid.uuid4()), "input": {"text": "x"}},
    )

    assert by_name.status_code == 200
    assert by_name.json()["assistant_id"] == str(
        uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "steps")
    )
    assert unknown.status_code == 404
    assert "not found" in unknown.json()["detail"]
    assert Run.objects.count() == 1


def test_list_is_newest_first_with_limit_offset_and_status(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    ids = []
    for text in ("one", "two", "three"):
        response = post(
            client_of,
            f"/threads/{thread_id}/runs",
            {"assistant_id": "steps", "input": {"text": text}},
        )
        ids.append(response.json()["run_id"])
    drain()
    pending = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "later"}, "after_seconds": 60},
    ).json()["run_id"]

    listed = client_of.get(f"/api/threads/{thread_id}/runs?limit=10&offset=0")
    page = client_of.get(f"/api/threads/{thread_id}/runs?limit=2&offset=1")
    done = client_of.get(f"/api/threads/{thread_id}/runs?status=success")
    bad = client_of.get(f"/api/threads/{thread_id}/runs?status=finished")

    assert [r["run_id"] for r in listed.json()] == [pending, *reversed(ids)]
    assert [r["run_id"] for r in page.json()] == [ids[2], ids[1]]
    assert [r["run_id"] for r in done.json()] == list(reversed(ids))
    assert bad.status_code == 422


def test_after_seconds_sets_created_at_in_the_future_and_holds_the_thread(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)

    run = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}, "after_seconds": 60},
    ).json()
    drain()

    assert run["created_at"] > run["updated_at"]
    assert Run.objects.get(pk=run["run_id"]).status == Run.Status.PENDING
    assert Thread.objects.get(pk=thread_id).status == Thread.Status.BUSY


# -- wait and join ----------------------------------------------------------------------


def test_wait_at_an_interrupt_answers_output_values_and_the_interrupt(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)

    response = post(
        client_of,
        f"/threads/{thread_id}/runs/wait",
        {"assistant_id": "purchase", "input": purchase_input()},
    )
    drain()

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    run_id = Run.objects.get(thread_id=thread_id).run_id
    assert response["Location"] == f"/threads/{thread_id}/runs/{run_id}/join"
    result = body_json(response)
    (interrupt,) = result.pop("__interrupt__")
    assert result == {  # the output schema's keys only
        "request_id": "PO-1",
        "approval_version": 1,
        "status": "pending_review",
        "budget_ok": True,
        "compliance_ok": True,
    }
    assert set(interrupt) == {"value", "id", "response_schema"}
    assert interrupt["response_schema"] is None
    assert interrupt["value"]["kind"] == "purchase_review"

    joined = client_of.get(f"/api/threads/{thread_id}/runs/{run_id}/join")
    assert joined.status_code == 200
    assert body_json(joined) == {**result, "__interrupt__": [interrupt]}


def test_wait_after_a_failure_is_200_with_the_error(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)

    response = post(
        client_of,
        f"/threads/{thread_id}/runs/wait",
        {"assistant_id": "steps", "input": {"text": "fail"}},
    )
    drain()

    assert response.status_code == 200
    assert body_json(response) == {
        "__error__": {"error": "ValueError", "message": "b failed on purpose"}
    }
    run = Run.objects.get(thread_id=thread_id)
    assert run.status == Run.Status.ERROR
    assert (
        body_json(client_of.get(f"/api/threads/{thread_id}/runs/{run.run_id}/join"))
        == body_json(client_of.get(f"/api/threads/{thread_id}/runs/{run.run_id}/join"))
        == {"__error__": {"error": "ValueError", "message": "b failed on purpose"}}
    )


def test_join_of_a_finished_run_answers_its_values(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    run_id = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}},
    ).json()["run_id"]
    drain()

    joined = client_of.get(f"/api/threads/{thread_id}/runs/{run_id}/join")

    assert body_json(joined) == {"text": "x", "log": ["a", "b"]}


# -- SSE ----------------------------------------------------------------------------------


def test_stream_headers_and_the_reference_order_of_updates_and_values(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)

    response = post(
        client_of,
        f"/threads/{thread_id}/runs/stream",
        {
            "assistant_id": "purchase",
            "input": purchase_input(),
            "stream_mode": ["updates", "values"],
        },
    )
    drain()

    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    run_id = Run.objects.get(thread_id=thread_id).run_id
    assert response["Location"] == f"/threads/{thread_id}/runs/{run_id}/stream"
    assert response["Content-Location"] == f"/threads/{thread_id}/runs/{run_id}"
    got = frames(response)
    assert got[0] == (None, "metadata", {"run_id": run_id, "attempt": 1})
    ids = [int(i) for i, _, _ in got[1:]]
    assert ids == sorted(set(ids))  # every stored event once, in order
    names = [event for _, event, _ in got[1:]]
    assert names == [
        "values",  # the input
        "updates",  # normalize
        "values",
        "updates",  # budget and compliance, one event each
        "updates",
        "values",
        "updates",  # the interrupt
        "values",  # the last values, carrying it
    ]
    data = [d for _, _, d in got[1:]]
    assert data[0] == {
        "request_id": "PO-1",
        "approval_version": 1,
        "amount_minor": 480_050,
        "vendor": "Acme",
        "category": "office",
        "checks": [],  # a reducer channel starts empty
    }
    assert set(data[1]) == {"normalize"}
    assert {next(iter(d)) for d in data[3:5]} == {"budget", "compliance"}
    assert set(data[6]) == {"__interrupt__"}
    assert data[7]["__interrupt__"] == data[6]["__interrupt__"]
    assert data[7]["status"] == "pending_review"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("values", ["values", "values", "values"]),
        ("updates", ["updates", "updates"]),
        ("custom", ["custom"]),
        ("tasks", ["tasks", "tasks", "tasks", "tasks"]),
        ("checkpoints", ["checkpoints"] * 4),
    ],
)
def test_stream_each_mode(
    client_of: Client, rita: User, mode: str, expected: list[str]
) -> None:
    response = post(
        client_of,
        f"/threads/{new_thread(rita)}/runs/stream",
        {"assistant_id": "steps", "input": {"text": "x"}, "stream_mode": mode},
    )
    drain()

    got = events(response)

    assert [name for name, _ in got[1:]] == expected
    data = [d for _, d in got[1:]]
    if mode == "custom":
        assert data == [{"progress": "a"}]
    if mode == "values":
        assert data[-1] == {"text": "x", "log": ["a", "b"]}
    if mode == "tasks":
        assert [(d["name"], "result" in d) for d in data] == [
            ("a", False),
            ("a", True),
            ("b", False),
            ("b", True),
        ]
    if mode == "checkpoints":
        assert [d["metadata"]["step"] for d in data] == [-1, 0, 1, 2]
        assert data[-1]["values"] == {"text": "x", "log": ["a", "b"]}


def test_stream_debug_and_several_modes_in_one_stream(
    client_of: Client, rita: User
) -> None:
    response = post(
        client_of,
        f"/threads/{new_thread(rita)}/runs/stream",
        {
            "assistant_id": "steps",
            "input": {"text": "x"},
            "stream_mode": ["debug", "custom", "updates"],
        },
    )
    drain()

    got = events(response)[1:]

    # the engine's own order (graph.stream with the same modes)
    assert [d["type"] if name == "debug" else name for name, d in got] == [
        "checkpoint",  # the input
        "checkpoint",  # step 0
        "task",
        "custom",
        "updates",
        "task_result",
        "checkpoint",
        "task",
        "updates",
        "task_result",
        "checkpoint",
    ]
    others = [(name, d) for name, d in got if name != "debug"]
    assert others == [
        ("custom", {"progress": "a"}),
        ("updates", {"a": {"log": ["a"]}}),
        ("updates", {"b": {"log": ["b"]}}),
    ]


def test_stream_messages_tuple_and_events_modes(client_of: Client, rita: User) -> None:
    response = post(
        client_of,
        f"/threads/{new_thread(rita)}/runs/stream",
        {
            "assistant_id": "steps",
            "input": {"text": "x"},
            "stream_mode": ["events", "messages-tuple"],
        },
    )
    drain()

    got = events(response)[1:]

    assert {name for name, _ in got} == {"events"}  # no chat model: no messages
    kinds = [(d["event"], d["name"]) for _, d in got]
    graph = kinds[0][1]  # the compiled graph's name
    assert kinds[0] == ("on_chain_start", graph)
    assert ("on_chain_start", "a") in kinds and ("on_chain_end", "b") in kinds
    assert kinds[-1] == ("on_chain_end", graph)
    task = next(d for _, d in got if d["name"] == "a")
    assert task["metadata"]["langgraph_node"] == "a"


def test_stream_of_a_failing_run_ends_with_an_error_event(
    client_of: Client, rita: User
) -> None:
    response = post(
        client_of,
        f"/threads/{new_thread(rita)}/runs/stream",
        {"assistant_id": "steps", "input": {"text": "fail"}, "stream_mode": "updates"},
    )
    drain()

    got = events(response)

    assert got[-1] == (
        "error",
        {"error": "ValueError", "message": "b failed on purpose"},
    )
    assert got[1] == ("updates", {"a": {"log": ["a"]}})


def test_stream_subgraphs_names_events_with_their_namespace(
    client_of: Client, rita: User
) -> None:
    response = post(
        client_of,
        f"/threads/{new_thread(rita)}/runs/stream",
        {
            "assistant_id": "nested",
            "input": {"text": "x"},
            "stream_mode": ["updates"],
            "stream_subgraphs": True,
        },
    )
    drain()

    names = [name.split(":", 1)[0] for name, _ in events(response)[1:]]

    assert names == ["updates", "updates|child", "updates|child", "updates"]


def test_a_stream_follows_a_run_that_executes_while_it_waits(
    client_of: Client, rita: User
) -> None:
    """The reader is already waiting when a worker (another thread) runs the run:
    it is woken through the channel layer and sends every event once, in order."""
    response = post(
        client_of,
        f"/threads/{new_thread(rita)}/runs/stream",
        {"assistant_id": "steps", "input": {"text": "x"}, "stream_mode": "updates"},
    )

    def work() -> None:
        try:
            drain()
        finally:
            connections.close_all()

    async def follow() -> list[bytes]:
        chunks = response.streaming_content
        got = [await anext(chunks)]  # metadata: nothing ran yet
        worker = threading.Thread(target=work)
        worker.start()
        got += [chunk async for chunk in chunks]
        worker.join()
        return got

    got = async_to_sync(follow)()

    assert got[0].startswith(b"event: metadata")
    body = b"".join(got[1:]).decode()
    assert body.count("event: updates") == 2
    assert body.index('"a"') < body.index('"b"')


def test_join_stream_replays_from_the_table_and_resumes_after_last_event_id(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    first = post(
        client_of,
        f"/threads/{thread_id}/runs/stream",
        {
            "assistant_id": "steps",
            "input": {"text": "x"},
            "stream_mode": ["updates", "values"],
        },
    )
    drain()
    streamed = frames(first)
    run_id = streamed[0][2]["run_id"]
    url = f"/api/threads/{thread_id}/runs/{run_id}/stream"

    again = frames(client_of.get(url))
    resumed = frames(client_of.get(url, HTTP_LAST_EVENT_ID=streamed[2][0]))
    only_values = frames(client_of.get(f"{url}?stream_mode=values"))

    assert again == streamed  # a worker restart loses nothing: it is the table
    assert resumed == streamed[3:]  # no metadata again, nothing twice
    assert [e for _, e, _ in only_values[1:]] == ["values", "values", "values"]
    bad = client_of.get(url, HTTP_LAST_EVENT_ID="seven")
    assert bad.status_code == 422


def test_a_background_run_records_values_and_updates_for_a_join_stream(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    run_id = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}},
    ).json()["run_id"]
    drain()

    got = events(client_of.get(f"/api/threads/{thread_id}/runs/{run_id}/stream"))

    assert [name for name, _ in got] == [
        "metadata",
        "values",
        "updates",
        "values",
        "updates",
        "values",
    ]


def test_stream_events_stay_out_of_the_activity_feed(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    post(
        client_of,
        f"/threads/{thread_id}/runs/stream",
        {"assistant_id": "steps", "input": {"text": "x"}, "stream_mode": ["values"]},
    )
    drain()

    shown = activity(thread_id, ["a", "b"]).events

    assert RunEvent.objects.filter(thread_id=thread_id, kind="stream").count() == 3
    assert shown and all(event["kind"] != "stream" for event in shown)


def test_on_disconnect_cancel_cancels_the_run_when_the_client_goes_away(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    response = post(
        client_of,
        f"/threads/{thread_id}/runs/stream",
        {
            "assistant_id": "steps",
            "input": {"text": "x"},
            "after_seconds": 60,
            "on_disconnect": "cancel",
        },
    )

    async def first_frame_then_leave() -> bytes:
        chunks = response.streaming_content
        first = await anext(chunks)
        await chunks.aclose()
        return first

    first = async_to_sync(first_frame_then_leave)()

    assert first.startswith(b"event: metadata")
    run = Run.objects.get(thread_id=thread_id)
    assert run.status == Run.Status.CANCELLED
    assert Thread.objects.get(pk=thread_id).status == Thread.Status.IDLE


def test_a_client_going_away_leaves_the_run_running_by_default(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    response = post(
        client_of,
        f"/threads/{thread_id}/runs/stream",
        {"assistant_id": "steps", "input": {"text": "x"}, "after_seconds": 60},
    )

    async def leave() -> None:
        chunks = response.streaming_content
        await anext(chunks)
        await chunks.aclose()

    async_to_sync(leave)()

    assert Run.objects.get(thread_id=thread_id).status == Run.Status.PENDING


# -- cancel and delete -----------------------------------------------------------------


def test_cancel_without_wait_is_202_with_no_body(client_of: Client, rita: User) -> None:
    thread_id = new_thread(rita)
    run_id = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}, "after_seconds": 60},
    ).json()["run_id"]

    response = post(client_of, f"/threads/{thread_id}/runs/{run_id}/cancel?wait=0")

    assert response.status_code == 202 and response.content == b""
    assert Run.objects.get(pk=run_id).status == Run.Status.CANCELLED  # cancelled
    assert Thread.objects.get(pk=thread_id).status == Thread.Status.IDLE


def test_cancel_with_wait_answers_the_stopped_run(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    run_id = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}, "after_seconds": 60},
    ).json()["run_id"]

    response = post(
        client_of, f"/threads/{thread_id}/runs/{run_id}/cancel?wait=1&action=interrupt"
    )

    assert response.status_code == 200
    assert response.json()["status"] == "interrupted"


def test_cancel_a_running_run_with_wait_waits_until_it_stopped(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    run_id = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "slow", "input": {"text": "x"}},
    ).json()["run_id"]
    Run.objects.filter(pk=run_id).update(status=Run.Status.RUNNING)  # claimed

    response = post(client_of, f"/threads/{thread_id}/runs/{run_id}/cancel?wait=1")
    Run.objects.filter(pk=run_id).update(status=Run.Status.CANCELLED)  # it stopped

    assert body_json(response)["status"] == "interrupted"
    assert Run.objects.get(pk=run_id).cancel_requested == "interrupt"


def test_cancel_rollback_of_a_pending_run_drops_it(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    run_id = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}, "after_seconds": 60},
    ).json()["run_id"]

    response = post(
        client_of, f"/threads/{thread_id}/runs/{run_id}/cancel?wait=1&action=rollback"
    )

    assert response.json()["status"] == "interrupted"
    assert not Run.objects.filter(pk=run_id).exists()
    assert client_of.get(f"/api/threads/{thread_id}/runs/{run_id}").status_code == 404


def test_cancel_a_finished_run_is_404(client_of: Client, rita: User) -> None:
    thread_id = new_thread(rita)
    run_id = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}},
    ).json()["run_id"]
    drain()

    response = post(client_of, f"/threads/{thread_id}/runs/{run_id}/cancel")
    unknown = post(client_of, f"/threads/{thread_id}/runs/nope/cancel?action=bogus")

    assert response.status_code == 404
    assert "already finished" in response.json()["detail"]
    assert unknown.status_code == 422  # the action is checked first


def test_delete_a_finished_run_is_204_and_an_active_one_409(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    done = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}},
    ).json()["run_id"]
    drain()
    busy = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "y"}, "after_seconds": 60},
    ).json()["run_id"]

    deleted = client_of.delete(f"/api/threads/{thread_id}/runs/{done}")
    refused = client_of.delete(f"/api/threads/{thread_id}/runs/{busy}")

    assert deleted.status_code == 204
    assert not Run.objects.filter(pk=done).exists()
    assert not RunEvent.objects.filter(run_id=done).exists()
    assert refused.status_code == 409
    assert Run.objects.filter(pk=busy).exists()


# -- errors --------------------------------------------------------------------------------


def test_another_users_thread_and_run_are_404_on_every_path(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    run_id = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}},
    ).json()["run_id"]
    mallory = api(member("mallory"))
    base = f"/threads/{thread_id}/runs"
    body = {"assistant_id": "steps", "input": {"text": "x"}}

    answers = [
        post(mallory, base, body),
        post(mallory, f"{base}/wait", body),
        post(mallory, f"{base}/stream", body),
        mallory.get(f"/api{base}"),
        mallory.get(f"/api{base}/{run_id}"),
        mallory.get(f"/api{base}/{run_id}/join"),
        mallory.get(f"/api{base}/{run_id}/stream"),
        post(mallory, f"{base}/{run_id}/cancel"),
        mallory.delete(f"/api{base}/{run_id}"),
        post(mallory, f"{base}/{run_id}/cancel", body),
        client_of.get(f"/api{base}/{uuid.uuid4()}"),
    ]

    assert [r.status_code for r in answers] == [404] * len(answers)
    assert all(r["Content-Type"] == "application/json" for r in answers)
    assert Run.objects.count() == 1
    assert Run.objects.get().status == Run.Status.PENDING


def test_unknown_thread_is_404_unless_if_not_exists_create(
    client_of: Client, rita: User
) -> None:
    missing = str(uuid.uuid4())
    body = {"assistant_id": "steps", "input": {"text": "x"}}

    refused = post(client_of, f"/threads/{missing}/runs", body)
    rejected = post(
        client_of, f"/threads/{missing}/runs", {**body, "if_not_exists": "reject"}
    )
    created = post(
        client_of, f"/threads/{missing}/runs", {**body, "if_not_exists": "create"}
    )
    not_uuid = post(client_of, "/threads/x/runs", {**body, "if_not_exists": "create"})

    assert (refused.status_code, rejected.status_code) == (404, 404)
    assert created.status_code == 200
    assert Thread.objects.get(pk=missing).owner == rita
    assert not_uuid.status_code == 422


def test_anonymous_requests_are_401(rita: User) -> None:
    thread_id = new_thread(rita)

    response = post(Client(), f"/threads/{thread_id}/runs", {"assistant_id": "steps"})

    assert response.status_code == 401
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"input": {"text": "x"}}, "assistant_id"),
        ({"assistant_id": "steps", "bogus": 1}, "bogus"),
        ({"assistant_id": "steps", "stream_mode": "tools"}, "stream_mode"),
        ({"assistant_id": "steps", "after_seconds": "5"}, "after_seconds"),
        ({"assistant_id": "steps", "stream_subgraphs": "true"}, "stream_subgraphs"),
        ({"assistant_id": "steps", "multitask_strategy": "drop"}, "multitask_strategy"),
        ({"assistant_id": "steps", "command": {}}, "command"),
        ({"assistant_id": "steps", "command": {"resume": 1, "jump": "b"}}, "jump"),
        ({"assistant_id": "steps", "config": {"callbacks": []}}, "callbacks"),
        ({"assistant_id": "steps", "webhook": "http://x"}, "webhook"),
        ({"assistant_id": "steps", "interrupt_before": ["nope"]}, "nope"),
        ({"assistant_id": "steps", "input": {}, "command": {"resume": 1}}, "both"),
        (
            {
                "assistant_id": "steps",
                "checkpoint": {"checkpoint_ns": "x", "checkpoint_id": "c"},
            },
            "checkpoint_ns",
        ),
    ],
)
def test_invalid_bodies_are_422_and_store_nothing(
    client_of: Client, rita: User, body: dict[str, Any], named: str
) -> None:
    thread_id = new_thread(rita)

    response = post(client_of, f"/threads/{thread_id}/runs", body)

    assert response.status_code == 422, response.content
    assert named in response.json()["detail"]
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "key", ["studio_user", "thread_id", "checkpoint_id", "__engine_durability"]
)
def test_reserved_configurable_keys_are_422(
    client_of: Client, rita: User, key: str
) -> None:
    thread_id = new_thread(rita)

    response = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {
            "assistant_id": "steps",
            "input": {"text": "x"},
            "config": {"configurable": {key: "rex"}},
        },
    )

    assert response.status_code == 422
    assert key in response.json()["detail"]
    assert not Run.objects.exists()


def test_malformed_json_is_422(client_of: Client, rita: User) -> None:
    response = post(client_of, f"/threads/{new_thread(rita)}/runs", "{not json")

    assert response.status_code == 422
    assert not Run.objects.exists()


def test_client_configurable_keys_reach_the_graph(
    client_of: Client, rita: User
) -> None:
    thread_id = new_thread(rita)
    post(
        client_of,
        f"/threads/{thread_id}/runs",
        {
            "assistant_id": "steps",
            "input": {"text": "x"},
            "config": {"configurable": {"model": "small"}},
            "metadata": {"who": "me"},
        },
    )
    drain()

    head = checkpoints("steps", thread_id)[0]

    assert head.metadata["assistant_id"] == str(
        uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "steps")
    )
    assert head.metadata["graph_id"] == "steps"
    assert head.metadata["studio_user"] == "rita"


# -- multitask strategies --------------------------------------------------------------------


def busy_thread(client: Client, owner: User) -> tuple[str, str]:
    """A thread held busy by a run due in a minute: (thread id, that run's id)."""
    thread_id = new_thread(owner)
    run_id = post(
        client,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "steps", "input": {"text": "x"}, "after_seconds": 60},
    ).json()["run_id"]
    return thread_id, run_id


@pytest.mark.parametrize("path", ["", "/wait", "/stream"])
def test_reject_on_a_busy_thread_is_409_and_stores_nothing(
    client_of: Client, rita: User, path: str
) -> None:
    thread_id, _ = busy_thread(client_of, rita)

    response = post(
        client_of,
        f"/threads/{thread_id}/runs{path}",
        {
            "assistant_id": "steps",
            "input": {"text": "y"},
            "multitask_strategy": "reject",
        },
    )

    assert response.status_code == 409
    assert response.json() == {"detail": BUSY}
    assert Run.objects.filter(thread_id=thread_id).count() == 1


def test_enqueue_waits_for_the_active_run(client_of: Client, rita: User) -> None:
    thread_id, first = busy_thread(client_of, rita)

    second = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {
            "assistant_id": "steps",
            "input": {"text": "y"},
            "multitask_strategy": "enqueue",
        },
    ).json()["run_id"]
    drain()

    assert Run.objects.get(pk=first).status == Run.Status.PENDING  # still due later
    assert Run.objects.get(pk=second).status == Run.Status.PENDING  # behind it


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_interrupt_and_rollback_stop_the_active_run(
    client_of: Client, rita: User, strategy: str
) -> None:
    thread_id, first = busy_thread(client_of, rita)

    second = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {
            "assistant_id": "steps",
            "input": {"text": "y"},
            "multitask_strategy": strategy,
        },
    ).json()
    drain()

    assert second["multitask_strategy"] == strategy
    assert Run.objects.get(pk=second["run_id"]).status == Run.Status.SUCCESS
    previous = Run.objects.filter(pk=first).first()
    if strategy == "rollback":
        assert previous is None  # a run that had not started is dropped whole
    else:
        assert previous is not None and previous.status == Run.Status.CANCELLED


# -- stateless runs -------------------------------------------------------------------


def test_stateless_wait_runs_on_a_temporary_thread_deleted_after_the_answer(
    client_of: Client,
) -> None:
    response = post(
        client_of, "/runs/wait", {"assistant_id": "steps", "input": {"text": "x"}}
    )
    drain()
    thread_id = response["Location"].split("/")[2]
    assert Thread.objects.filter(pk=thread_id).exists()  # until the answer is read

    assert body_json(response) == {"text": "x", "log": ["a", "b"]}
    assert not Thread.objects.filter(pk=thread_id).exists()
    assert not Run.objects.exists() and not RunEvent.objects.exists()
    assert checkpoints("steps", thread_id) == []


def test_stateless_stream_with_keep_keeps_the_thread(client_of: Client) -> None:
    response = post(
        client_of,
        "/runs/stream",
        {"assistant_id": "steps", "input": {"text": "x"}, "on_completion": "keep"},
    )
    drain()
    thread_id = response["Content-Location"].split("/")[2]

    got = events(response)

    assert got[-1] == ("values", {"text": "x", "log": ["a", "b"]})
    thread = Thread.objects.get(pk=thread_id)
    assert thread.delete_after is None and thread.graph == "steps"
    assert Run.objects.get(thread=thread).kwargs["temporary"] is False


def test_stateless_background_run_is_swept_after_its_grace(client_of: Client) -> None:
    with override_settings(STUDIO_TEMPORARY_THREAD_GRACE_SECONDS=0):
        run = post(
            client_of, "/runs", {"assistant_id": "steps", "input": {"text": "x"}}
        ).json()
        drain()
        assert run["kwargs"]["temporary"] is True
        assert Thread.objects.get(pk=run["thread_id"]).delete_after is not None

        assert sweep_temporary_threads() == 1

    assert not Thread.objects.filter(pk=run["thread_id"]).exists()
    assert checkpoints("steps", run["thread_id"]) == []


def test_stateless_run_refuses_a_checkpoint(client_of: Client) -> None:
    response = post(
        client_of,
        "/runs",
        {"assistant_id": "steps", "input": {"text": "x"}, "checkpoint_id": "c-1"},
    )

    assert response.status_code == 422
    assert not Thread.objects.exists()


# -- checkpoints, interrupts, commands -----------------------------------------------------


def test_a_run_from_a_past_checkpoint_forks_the_thread(
    client_of: Client, rita: User
) -> None:
    thread_id = finished_steps_run(client_of, rita, "x")
    after_a = next(
        s for s in checkpoints("steps", thread_id) if s.next == ("b",)
    ).config["configurable"]["checkpoint_id"]

    response = post(
        client_of,
        f"/threads/{thread_id}/runs/wait",
        {
            "assistant_id": "steps",
            "checkpoint": {
                "thread_id": thread_id,
                "checkpoint_ns": "",
                "checkpoint_id": after_a,
            },
        },
    )
    drain()

    assert body_json(response) == {"text": "x", "log": ["a", "b"]}
    assert (
        Run.objects.filter(thread_id=thread_id).latest("created_at").checkpoint_id
        == after_a
    )


def test_a_run_from_a_checkpoint_of_another_thread_is_404_and_queues_nothing(
    client_of: Client, rita: User
) -> None:
    other = finished_steps_run(client_of, rita, "o")
    foreign = checkpoints("steps", other)[0].config["configurable"]["checkpoint_id"]
    thread_id = new_thread(rita)
    queued = Run.objects.count()

    responses = [
        post(
            client_of,
            f"/threads/{thread_id}/runs",
            {"assistant_id": "steps", "input": {"text": "x"}, "checkpoint_id": wanted},
        )
        for wanted in (foreign, "1f0c0000-0000-6000-8000-000000000000")
    ]

    assert [r.status_code for r in responses] == [404, 404]
    assert "no checkpoint" in json.loads(responses[0].content)["detail"]
    assert Run.objects.count() == queued


def test_interrupt_before_and_a_goto_command(client_of: Client, rita: User) -> None:
    thread_id = new_thread(rita)
    paused = post(
        client_of,
        f"/threads/{thread_id}/runs/wait",
        {"assistant_id": "steps", "input": {"text": "x"}, "interrupt_before": ["b"]},
    )
    drain()
    assert body_json(paused) == {"text": "x", "log": ["a"]}

    resumed = post(
        client_of,
        f"/threads/{thread_id}/runs/wait",
        {"assistant_id": "steps", "command": {"update": {"text": "y"}, "goto": "b"}},
    )
    drain()

    assert body_json(resumed)["text"] == "y"
    assert (
        Run.objects.filter(thread_id=thread_id).latest("created_at").status
        == Run.Status.SUCCESS
    )


# -- governance: only the reviewer console approves a purchase ------------------------------


def test_a_reviewers_resume_goes_through_the_decision_protocol(
    client_of: Client, rex: User
) -> None:
    thread_id = waiting_purchase(client_of)

    response = post(
        api(rex),
        f"/threads/{thread_id}/runs/wait",
        {"assistant_id": "purchase", "command": {"resume": decision()}},
    )
    drain()

    assert response.status_code == 200
    result = body_json(response)
    assert result["status"] == "executed"
    assert PurchaseOutbox.objects.filter(request_id="PO-1").count() == 1
    decided = ApprovalDecision.objects.get(request_id="PO-1")
    assert decided.reviewer == rex
    run = Run.objects.get(pk=decided.run_id)
    assert (
        run.created_by == rex and run.kwargs["command"]["resume"]["action"] == "approve"
    )


def test_a_reviewers_resume_as_a_background_run_answers_the_queued_run(
    client_of: Client, rex: User
) -> None:
    thread_id = waiting_purchase(client_of)

    response = post(
        api(rex),
        f"/threads/{thread_id}/runs",
        {"assistant_id": "purchase", "command": {"resume": decision()}},
    )

    assert response.status_code == 200
    assert response.json()["run_id"] == ApprovalDecision.objects.get().run_id
    drain()
    assert PurchaseOutbox.objects.count() == 1


def test_a_decisions_run_is_not_cancelled_when_the_reviewer_goes_away(
    client_of: Client, rex: User
) -> None:
    thread_id = waiting_purchase(client_of)
    response = post(
        api(rex),
        f"/threads/{thread_id}/runs/stream",
        {
            "assistant_id": "purchase",
            "command": {"resume": decision()},
            "on_disconnect": "cancel",
        },
    )

    async def leave() -> None:
        chunks = response.streaming_content
        await anext(chunks)
        await chunks.aclose()

    async_to_sync(leave)()
    drain()

    assert PurchaseOutbox.objects.filter(request_id="PO-1").count() == 1


def test_a_first_level_approval_is_202_with_the_decision(
    client_of: Client, rex: User
) -> None:
    thread_id = waiting_purchase(client_of, amount_minor=7_250_000)  # 72,500 CNY

    response = post(
        api(rex),
        f"/threads/{thread_id}/runs/stream",
        {"assistant_id": "purchase", "command": {"resume": decision()}},
    )

    assert response.status_code == 202
    answer = response.json()
    assert "senior reviewer" in answer["detail"]
    assert answer["decision"]["level"] == 1 and answer["decision"]["final"] is False
    assert Run.objects.filter(thread_id=thread_id).count() == 1  # no run yet
    assert not PurchaseOutbox.objects.exists()


def test_a_forged_reviewer_in_the_resume_is_422(client_of: Client, rex: User) -> None:
    thread_id = waiting_purchase(client_of)

    response = post(
        api(rex),
        f"/threads/{thread_id}/runs",
        {"assistant_id": "purchase", "command": {"resume": decision(reviewer="boss")}},
    )

    assert response.status_code == 422
    assert "reviewer" in response.json()["detail"]
    assert not ApprovalDecision.objects.exists()


def refused_without_purchase(thread_id: str, runs_before: int) -> bool:
    return (
        not PurchaseOutbox.objects.exists()
        and not ApprovalDecision.objects.exists()
        and Run.objects.filter(thread_id=thread_id).count() == runs_before
    )


@pytest.mark.parametrize("path", ["", "/wait", "/stream"])
def test_a_requesters_resume_is_403_on_every_path(client_of: Client, path: str) -> None:
    thread_id = waiting_purchase(client_of)

    response = post(
        client_of,
        f"/threads/{thread_id}/runs{path}",
        {"assistant_id": "purchase", "command": {"resume": decision()}},
    )

    assert response.status_code == 403
    assert refused_without_purchase(thread_id, 1)


@pytest.mark.parametrize(
    "command",
    [
        {"update": {"decision": {"action": "approve", "reviewer": "rex"}}},
        {"update": {"budget_ok": True}},
        {"update": [["decision", {"action": "approve"}]], "goto": "execute"},
        {"goto": "human_review"},
    ],
)
def test_a_requesters_command_writing_protected_keys_is_403(
    client_of: Client, command: dict[str, Any]
) -> None:
    thread_id = waiting_purchase(client_of)

    response = post(
        client_of,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "purchase", "command": command},
    )

    assert response.status_code == 403
    assert refused_without_purchase(thread_id, 1)
    assert AuditEntry.objects.filter(action__contains="refus").exists()


def test_a_requesters_goto_execute_buys_nothing(client_of: Client) -> None:
    thread_id = waiting_purchase(client_of)

    response = post(
        client_of,
        f"/threads/{thread_id}/runs/wait",
        {"assistant_id": "purchase", "command": {"goto": "execute"}},
    )
    drain()

    assert response.status_code == 200
    result = body_json(response)
    assert result.get("status") != "executed"
    assert not PurchaseOutbox.objects.exists()


def test_a_requesters_resume_from_a_past_checkpoint_is_403(
    client_of: Client, rita: User, rex: User
) -> None:
    thread_id = waiting_purchase(client_of)
    rejected = post(
        api(rex),
        f"/threads/{thread_id}/runs/wait",
        {
            "assistant_id": "purchase",
            "command": {"resume": decision(action="reject", reason="no budget")},
        },
    )
    drain()
    assert body_json(rejected)["status"] == "rejected"
    at_review = next(
        s for s in checkpoints("purchase", thread_id) if s.next == ("human_review",)
    ).config["configurable"]["checkpoint_id"]
    runs_before = Run.objects.filter(thread_id=thread_id).count()

    response = post(
        client_of,
        f"/threads/{thread_id}/runs/wait",
        {
            "assistant_id": "purchase",
            "checkpoint_id": at_review,
            "command": {"resume": {**decision(), "reviewer": "rex"}},
        },
    )

    assert response.status_code == 403
    assert not PurchaseOutbox.objects.exists()
    assert Run.objects.filter(thread_id=thread_id).count() == runs_before
    # replaying from there asks the reviewer again; it buys nothing either
    replay = post(
        client_of,
        f"/threads/{thread_id}/runs/wait",
        {"assistant_id": "purchase", "checkpoint_id": at_review},
    )
    drain()
    assert "__interrupt__" in body_json(replay)
    assert not PurchaseOutbox.objects.exists()


def test_a_requesters_resume_before_the_review_asked_is_403(
    client_of: Client, rita: User
) -> None:
    """After ``interrupt_before=["human_review"]`` nothing waits yet, but a resume
    would answer the review's first ``interrupt()``: refused as well."""
    thread_id = new_thread(rita)
    post(
        client_of,
        f"/threads/{thread_id}/runs",
        {
            "assistant_id": "purchase",
            "input": purchase_input(),
            "interrupt_before": ["human_review"],
        },
    )
    drain()

    response = post(
        client_of,
        f"/threads/{thread_id}/runs/wait",
        {
            "assistant_id": "purchase",
            "command": {"resume": {**decision(), "reviewer": "rex"}},
        },
    )

    assert response.status_code == 403
    assert refused_without_purchase(thread_id, 1)


@pytest.mark.parametrize(
    "body",
    [
        {"command": {"resume": {**decision(), "reviewer": "rex"}}},
        {"command": {"goto": "execute", "update": {"request_id": "PO-1"}}},
        {"input": {**purchase_input(), "decision": {"action": "approve"}}},
        {"input": {**purchase_input(), "budget_ok": True}},
    ],
    ids=["resume", "goto", "input-decision", "input-budget"],
)
def test_a_stateless_purchase_buys_nothing(client_of: Client, body: dict) -> None:
    response = post(
        client_of,
        "/runs/wait",
        {"assistant_id": "purchase", "on_completion": "keep", **body},
    )
    drain()

    assert response.status_code in (200, 403)
    if response.status_code == 200:
        assert body_json(response).get("status") != "executed"
    assert not PurchaseOutbox.objects.exists()
    assert not ApprovalDecision.objects.exists()


@pytest.mark.parametrize("path", ["/runs", "/runs/wait", "/runs/stream"])
def test_a_stateless_purchase_with_a_decision_in_its_input_buys_nothing(
    client_of: Client, path: str
) -> None:
    response = post(
        client_of,
        path,
        {
            "assistant_id": "purchase",
            "input": {
                **purchase_input(),
                "decision": {"action": "approve"},
                "budget_ok": True,
            },
            "on_completion": "keep",
        },
    )
    drain()

    assert response.status_code == 200
    run = Run.objects.get()
    assert not PurchaseOutbox.objects.exists()
    if run.status == Run.Status.ERROR:  # the input schema refused the keys
        assert "decision" in run.error["message"]
    else:  # or ignored them: the request still waits for a reviewer
        state = runnable("purchase").get_state(
            {"configurable": {"thread_id": run.thread_id}}
        )
        assert state.next == ("human_review",)
        assert "decision" not in state.values


def test_a_reviewer_may_read_but_not_cancel_a_run_of_the_thread(
    client_of: Client, rex: User
) -> None:
    thread_id = waiting_purchase(client_of)
    run_id = Run.objects.get(thread_id=thread_id).run_id
    reviewer = api(rex)

    read_ok = reviewer.get(f"/api/threads/{thread_id}/runs/{run_id}")
    start = post(
        reviewer,
        f"/threads/{thread_id}/runs",
        {"assistant_id": "purchase", "input": purchase_input("PO-9")},
    )

    assert read_ok.status_code == 200
    assert start.status_code == 403
    cancel = post(reviewer, f"/threads/{thread_id}/runs/{run_id}/cancel")
    assert cancel.status_code == 403
    joined = reviewer.get(
        f"/api/threads/{thread_id}/runs/{run_id}/stream?cancel_on_disconnect=true"
    )
    assert joined.status_code == 403
    assert (
        reviewer.get(f"/api/threads/{thread_id}/runs/{run_id}/stream").status_code
        == 200
    )
