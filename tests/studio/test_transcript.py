"""The conversation on a chat thread's page, and its tokens arriving over the socket.

The worker records a model's streamed text as ``token`` events; the page shows the
checkpoint's messages (escaped), the answer being written in the active run, and the
socket sends each token as an out-of-band fragment. The Activity list stays for run
events, and the page's last event id counts the tokens (a reconnect repeats none).
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from langchain_core.messages import AIMessageChunk, ToolMessage

from engine import events as ev
from studio.asgi import application
from studio.models import Run, RunEvent, Thread
from studio.services import activity, run_log, runs
from studio.services.model_tokens import TOKEN, TokenRecorder, chunk_text
from studio.services.registered_graphs import runnable
from tests._support.reviews import member
from tests._support.studio import serve_graphs
from tests._support.threads import drain

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs(
    {
        "tool_agent": "tests.studio.agent_graphs_for_tests:fast_agent",
        "purchase": "studio.demo_graphs.purchase:build",
    }
)

ORIGIN = (b"origin", b"http://localhost")


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def ask(user: User, text: str) -> str:
    run = runs.start_run(
        graph="tool_agent",
        user=user,
        input={"messages": [{"role": "user", "content": text}]},
    )
    drain()
    return run.thread_id


def tokens_of(thread_id: str) -> list[dict[str, Any]]:
    return list(
        RunEvent.objects.filter(thread_id=thread_id, kind=TOKEN)
        .order_by("id")
        .values_list("payload", flat=True)
    )


# -- recording ----------------------------------------------------------------------------


def part(message: Any, ns: tuple[str, ...] = ()) -> ev.StreamPart:
    return ev.StreamPart(
        mode="messages", ns=ns, payload=(message, {"langgraph_node": "model"})
    )


def test_the_recorder_keeps_text_pieces_of_root_model_chunks_only() -> None:
    recorder = TokenRecorder()

    found = [
        recorder.records(p)
        for p in (
            part({"role": "assistant", "id": "m1", "content": "Hel"}),
            part({"role": "assistant", "id": "m1", "content": "lo"}),
            part({"role": "assistant", "id": "m1", "content": "", "tool_calls": [{}]}),
            part(AIMessageChunk(content=" there", id="m2")),
            part(ToolMessage(content="tool says", tool_call_id="c1")),  # whole message
            part({"role": "assistant", "id": "m3", "content": "inner"}, ns=("sub:1",)),
        )
    ]

    assert found[0] == [
        (TOKEN, {"message_id": "m1", "node": "model", "delta": "Hel", "first": True})
    ]
    assert found[1][0][1]["first"] is False
    assert found[2] == [] and found[4] == [] and found[5] == []
    assert found[3][0][1]["delta"] == " there"
    assert chunk_text({"role": "user", "content": "x"}) is None


def test_a_run_records_its_tokens_in_order_and_they_add_up_to_the_answers() -> None:
    ada = member("ada")
    thread_id = ask(ada, "What is A-1001 in EUR?")

    recorded = tokens_of(thread_id)
    texts: dict[str, str] = {}
    for token in recorded:
        assert token["first"] is (token["message_id"] not in texts)
        texts[token["message_id"]] = texts.get(token["message_id"], "") + token["delta"]
        assert token["node"] == "model"

    answers = [
        m
        for m in runnable("tool_agent")
        .get_state({"configurable": {"thread_id": thread_id}})
        .values["messages"]
        if m.type == "ai"
    ]
    assert [texts[str(m.id)] for m in answers] == [m.content for m in answers]
    assert answers[-1].content.startswith("Order A-1001 for Acme Ltd totals 168.87 EUR")


# -- the page -----------------------------------------------------------------------------


def test_the_page_shows_the_conversation_escaped_next_to_the_graph() -> None:
    ada = member("ada")
    thread_id = ask(ada, "<script>alert(1)</script> What is A-1001?")

    html = client_for(ada).get(f"/threads/{thread_id}/").content.decode()

    assert 'id="transcript"' in html
    assert html.index('id="transcript"') < html.index('id="graph-drawing"')
    assert "&lt;script&gt;alert(1)&lt;/script&gt; What is A-1001?" in html
    assert "<script>alert(1)" not in html
    assert "calls <code>lookup_order</code>" in html
    assert "tool <code>convert_currency</code>" in html
    assert "totals 181.86 USD" in html


def test_the_activity_list_leaves_tokens_out_but_resumes_after_them() -> None:
    ada = member("ada")
    thread_id = ask(ada, "What is A-1002?")
    run = Run.objects.get(thread_id=thread_id)
    late = run_log.append(
        run, TOKEN, {"message_id": "m9", "node": "model", "delta": "x", "first": True}
    )

    view = activity.activity(thread_id, ())

    assert view.events and all(e["kind"] != TOKEN for e in view.events)
    assert view.events[0]["kind"] == "run.status"
    assert view.last_event_id == late.id


def test_the_answer_being_written_shows_on_a_page_loaded_mid_run() -> None:
    ada = member("ada")
    thread = Thread.objects.create(graph="tool_agent", owner=ada)
    run = Run.objects.create(
        thread=thread, graph="tool_agent", status=Run.Status.RUNNING
    )
    for index, piece in enumerate(["Order", " A-1001", " <b>totals</b>"]):
        run_log.append(
            run,
            TOKEN,
            {
                "message_id": "m-live",
                "node": "model",
                "delta": piece,
                "first": index == 0,
            },
        )

    html = client_for(ada).get(f"/threads/{thread.thread_id}/").content.decode()

    dom_id = activity.stream_dom_id("m-live")
    assert f'id="{dom_id}-text">Order A-1001 &lt;b&gt;totals&lt;/b&gt;</p>' in html
    last = RunEvent.objects.filter(thread=thread).latest("id").id
    assert f'data-last-event="{last}"' in html


def test_the_conversation_refreshes_as_an_htmx_partial() -> None:
    ada = member("ada")
    thread_id = ask(ada, "What is A-1001?")

    response = client_for(ada).get(
        f"/threads/{thread_id}/",
        headers={"HX-Request": "true", "HX-Target": "transcript-settled"},
    )

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="transcript-settled"')
    assert "What is A-1001?" in html
    assert 'id="timeline"' not in html


def test_a_graph_without_messages_has_no_conversation() -> None:
    ada = member("ada")
    run = runs.start_run(
        graph="purchase",
        user=ada,
        input={"request_id": "PO-1", "approval_version": 1, "amount_minor": 100},
    )
    drain()

    html = client_for(ada).get(f"/threads/{run.thread_id}/").content.decode()

    assert 'id="transcript"' not in html
    assert not RunEvent.objects.filter(kind=TOKEN).exists()


# -- the socket ---------------------------------------------------------------------------


@sync_to_async
def _setup() -> tuple[bytes, str, Run]:
    ada = member("ada")
    client = client_for(ada)
    thread = Thread.objects.create(graph="tool_agent", owner=ada)
    run = Run.objects.create(
        thread=thread, graph="tool_agent", status=Run.Status.RUNNING
    )
    return (
        f"sessionid={client.cookies['sessionid'].value}".encode(),
        thread.thread_id,
        run,
    )


@sync_to_async
def _token(run: Run, delta: str, first: bool) -> int:
    return run_log.append(
        run,
        TOKEN,
        {"message_id": "m-1", "node": "model", "delta": delta, "first": first},
    ).id


async def test_tokens_arrive_over_the_socket_as_escaped_transcript_fragments() -> None:
    cookie, thread_id, run = await _setup()
    communicator = WebsocketCommunicator(
        application,
        f"/ws/threads/{thread_id}/",
        headers=[ORIGIN, (b"cookie", cookie)],
    )
    connected, _ = await communicator.connect()

    first_id = await _token(run, "Hello", True)
    first = await communicator.receive_from(timeout=3)
    second_id = await _token(run, " <i>world</i>", False)
    second = await communicator.receive_from(timeout=3)
    await communicator.disconnect()

    dom_id = activity.stream_dom_id("m-1")
    assert connected
    assert 'hx-swap-oob="beforeend:#transcript-stream"' in first
    assert f'<p class="message__text" id="{dom_id}-text">Hello</p>' in first
    assert f'data-last-event="{first_id}"' in first
    assert (
        f'<div hx-swap-oob="beforeend:#{dom_id}-text"> &lt;i&gt;world&lt;/i&gt;</div>'
        in second
    )
    assert f'data-last-event="{second_id}"' in second
    assert "run-events" not in first + second  # not an Activity entry
