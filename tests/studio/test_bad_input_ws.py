"""Curated bad input against the WebSockets (``/ws/threads/<id>/``, ``/ws/reviews/``).

Each case is what an attacker or a broken client sends: foreign and forged
``Origin`` headers, addresses and query strings that name nothing or overflow,
frames of every wrong shape. The promises: a foreign origin never gets a socket,
nobody else's thread is told apart from a thread that does not exist, nothing
closes with 1011 (a server error), and a bad frame leaves the socket open and
working. ``test_consumers.py`` holds the first of these cases; the lists here
are the sweep.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from studio.asgi import application
from studio.consumers import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND
from studio.models import Run, RunEvent, Thread
from studio.services import run_log

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://localhost")

FOREIGN_ORIGINS = [
    b"https://evil.example",
    b"http://localhost.evil.example",
    b"http://evil.example/?http://localhost",
    b"null",
    b"file://",
    b"http://127.0.0.2",
    b"http://localhost@evil.example",
    b"javascript:alert(1)",
    b"",
]
PATHS = [
    "/ws/threads/../reviews/",
    "/ws/threads/%00/",
    "/ws/threads/" + "x" * 5000 + "/",
    "/ws/threads/<script>/",
    "/ws/threads/\u202e\u0000/",
    "/ws/reviews/extra/",
    "/ws/",
    "/ws",
    "/ws/threads/%2e%2e/",
]
QUERIES = [
    "after=99999999999999999999999999",
    "after=-5",
    "after=1e400",
    "after=NaN",
    "after=%00",
    "after=1&after=2",
    "format=<script>alert(1)</script>",
    "format=json&format=html",
    "x=" + "y" * 10_000,
    "%ff%fe=%ff",
]
FRAMES: list[dict[str, Any]] = [
    {"text_data": '{"after": 99999999999999999999999999999}'},
    {"text_data": '{"after": -99999999999999999999999999999}'},
    {"text_data": '{"after": 1e400}'},
    {"text_data": '{"after": 1.5}'},
    {"text_data": '{"after": true}'},
    {"text_data": '{"after": null}'},
    {"text_data": '{"after": [1]}'},
    {"text_data": '{"after": {"$gt": 0}}'},
    {"text_data": '{"after": 1, "after": 2}'},
    {"text_data": '{"type": "run.event", "event_id": 999999}'},
    {"text_data": '{"type": "websocket.disconnect"}'},
    {"text_data": "[]"},
    {"text_data": '"after"'},
    {"text_data": "null"},
    {"text_data": "\ud800"},
    {"text_data": '{"\\ud800": 1}'},
    {"text_data": " "},
    {"text_data": "{" * 5000},
    {"bytes_data": b"\x00"},
    {"bytes_data": b'{"after": 0}'},
]
SEEN_TO_THE_END = [{"text_data": '{"after": 99999999999999999999999999999}'}]
"""Frames that truthfully ask for nothing more (the socket stays open, and quiet)."""
TRIED = {"count": 0}


@pytest.fixture(scope="module", autouse=True)
def _tally() -> Iterator[None]:
    yield
    print(f"\ncurated socket cases: {TRIED['count']} sockets")


@sync_to_async
def _session_cookie(username: str) -> bytes:
    user, _ = User.objects.get_or_create(username=username)
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


@sync_to_async
def _thread_with_an_event(owner: str) -> str:
    user = User.objects.get(username=owner)
    thread = Thread.objects.create(graph="purchase", owner=user)
    run = Run.objects.create(thread=thread, graph="purchase")
    run_log.append(run, "task.start", {"node": "n", "step": 0, "ns": []})
    return thread.thread_id


@sync_to_async
def _append(thread_id: str, node: str) -> int:
    run = Run.objects.filter(thread_id=thread_id).first()
    assert run is not None
    return run_log.append(run, "task.end", {"node": node, "step": 1}).id


@sync_to_async
def _rows() -> tuple[int, int, int]:
    return Thread.objects.count(), Run.objects.count(), RunEvent.objects.count()


def _socket(path: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    TRIED["count"] += 1
    return WebsocketCommunicator(application, path, headers=list(headers))


async def _closing_code(communicator: WebsocketCommunicator) -> int | None:
    """The close code the server sent (None: the handshake was refused outright)."""
    connected, code = await communicator.connect()
    if not connected:
        assert code != 1011
        return None
    output = await communicator.receive_output(timeout=3)
    assert output["type"] == "websocket.close", output
    return int(output["code"])


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
@pytest.mark.parametrize("where", ["thread", "reviews"])
async def test_a_foreign_origin_never_gets_a_socket(origin: bytes, where: str) -> None:
    cookie = await _session_cookie("ada")
    thread_id = await _thread_with_an_event("ada")
    path = f"/ws/threads/{thread_id}/" if where == "thread" else "/ws/reviews/"
    communicator = _socket(path, (b"origin", origin), (b"cookie", cookie))

    connected, _ = await communicator.connect()

    assert not connected
    await communicator.disconnect()


async def test_the_same_origin_does_get_one() -> None:
    # The foreign-origin cases above fail for the right reason only if this passes.
    cookie = await _session_cookie("ada")
    thread_id = await _thread_with_an_event("ada")
    communicator = _socket(
        f"/ws/threads/{thread_id}/?format=json", ORIGIN, (b"cookie", cookie)
    )

    connected, _ = await communicator.connect()

    assert connected
    assert (await communicator.receive_json_from())["type"] == "hello"
    await communicator.disconnect()


@pytest.mark.parametrize("path", PATHS)
async def test_an_address_that_names_nothing_closes_without_a_server_error(
    path: str,
) -> None:
    cookie = await _session_cookie("ada")
    rows = await _rows()

    code = await _closing_code(_socket(path, ORIGIN, (b"cookie", cookie)))

    assert code in (None, CLOSE_NOT_FOUND, CLOSE_FORBIDDEN)
    assert await _rows() == rows


async def test_another_users_thread_and_no_thread_close_alike() -> None:
    await _session_cookie("owner")
    theirs = await _thread_with_an_event("owner")
    cookie = await _session_cookie("mallory")

    codes = [
        await _closing_code(_socket(path, ORIGIN, (b"cookie", cookie)))
        for path in (
            f"/ws/threads/{theirs}/",
            "/ws/threads/00000000-0000-4000-8000-000000000000/",
            "/ws/threads/not-a-uuid/",
        )
    ]

    assert codes == [CLOSE_FORBIDDEN] * 3


@pytest.mark.parametrize("query", QUERIES)
async def test_a_bad_query_string_still_serves_the_thread(query: str) -> None:
    cookie = await _session_cookie("ada")
    thread_id = await _thread_with_an_event("ada")
    communicator = _socket(
        f"/ws/threads/{thread_id}/?{query}", ORIGIN, (b"cookie", cookie)
    )

    connected, _ = await communicator.connect()
    assert connected
    await communicator.receive_nothing(timeout=0.2)  # the replay, if any
    while not await communicator.receive_nothing(timeout=0.1):
        output = await communicator.receive_output()
        assert output["type"] != "websocket.close", output
    new_id = await _append(thread_id, "after-a-bad-query")

    # A huge ``after`` may skip the replay, never the socket: it stays open.
    if "999999" not in query:
        live = await communicator.receive_output(timeout=3)
        assert live["type"] == "websocket.send"
        assert str(new_id) in (live.get("text") or "") or "after-a-bad-query" in (
            live.get("text") or ""
        )
    else:
        assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: repr(f)[:40])
async def test_a_bad_frame_is_ignored_and_the_socket_keeps_working(
    frame: dict[str, Any],
) -> None:
    cookie = await _session_cookie("ada")
    thread_id = await _thread_with_an_event("ada")
    communicator = _socket(
        f"/ws/threads/{thread_id}/?format=json", ORIGIN, (b"cookie", cookie)
    )
    await communicator.connect()
    assert (await communicator.receive_json_from())["type"] == "hello"
    await communicator.receive_json_from()  # the replayed event
    rows = await _rows()

    await communicator.send_to(**frame)
    while not await communicator.receive_nothing(timeout=0.2):
        output = await communicator.receive_output()
        assert output["type"] != "websocket.close", output

    assert await _rows() == rows
    new_id = await _append(thread_id, "still-open")
    if frame in SEEN_TO_THE_END:  # "I have seen up to there": the socket stays quiet
        assert await communicator.receive_nothing(timeout=0.5)
    else:
        live = await communicator.receive_json_from(timeout=3)
        assert live["id"] == new_id
    await communicator.disconnect()
