from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from studio.asgi import application
from studio.consumers import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from studio.models import Run, Thread
from studio.services import run_log

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://localhost")


@sync_to_async
def _session_cookie(username: str = "ada") -> bytes:
    user = User.objects.create_user(username, password="x")
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


@sync_to_async
def _thread_with_events(owner: str, count: int) -> tuple[str, list[int]]:
    user = User.objects.get(username=owner)
    thread = Thread.objects.create(graph="purchase", owner=user)
    run = Run.objects.create(thread=thread, graph="purchase")
    ids = [
        run_log.append(run, "task.start", {"node": f"n{i}", "step": i, "ns": []}).id
        for i in range(count)
    ]
    return thread.thread_id, ids


@sync_to_async
def _append(thread_id: str, node: str) -> int:
    run = Run.objects.filter(thread_id=thread_id).first()
    assert run is not None
    return run_log.append(
        run, "task.end", {"node": node, "step": 1, "duration": 0.01}
    ).id


def _communicator(*headers: tuple[bytes, bytes], path: str) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=list(headers))


async def test_consumer_replays_stored_events_then_forwards_new_ones_as_json() -> None:
    cookie = await _session_cookie("ada")
    thread_id, ids = await _thread_with_events("ada", 3)
    communicator = _communicator(
        ORIGIN,
        (b"cookie", cookie),
        path=f"/ws/threads/{thread_id}/?format=json&after={ids[0]}",
    )

    connected, _ = await communicator.connect()
    hello: dict[str, Any] = await communicator.receive_json_from()
    backlog = [await communicator.receive_json_from() for _ in range(2)]
    new_id = await _append(thread_id, "human_review")
    live = await communicator.receive_json_from(timeout=3)

    assert connected
    assert hello == {"type": "hello", "thread_id": thread_id, "after": ids[0]}
    assert [e["id"] for e in backlog] == ids[1:]
    assert live["id"] == new_id and live["node"] == "human_review"
    assert live["summary"].startswith("human_review finished")
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_consumer_sends_html_fragments_that_escape_values() -> None:
    cookie = await _session_cookie("ada")
    thread_id, _ = await _thread_with_events("ada", 0)
    communicator = _communicator(
        ORIGIN, (b"cookie", cookie), path=f"/ws/threads/{thread_id}/"
    )
    await communicator.connect()

    await _append(thread_id, "<script>alert(1)</script>")
    html = await communicator.receive_from(timeout=3)

    assert 'hx-swap-oob="afterbegin:#run-events"' in html  # newest first
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    await communicator.disconnect()


async def test_anonymous_socket_is_closed_with_4401() -> None:
    communicator = _communicator(ORIGIN, path="/ws/threads/t-1/")

    await communicator.connect()
    closing = await communicator.receive_output()

    assert (closing["type"], closing["code"]) == (
        "websocket.close",
        CLOSE_UNAUTHENTICATED,
    )


async def test_another_users_thread_is_closed_with_4403() -> None:
    await _session_cookie("owner")
    thread_id, _ = await _thread_with_events("owner", 1)
    intruder = await _session_cookie("mallory")
    communicator = _communicator(
        ORIGIN, (b"cookie", intruder), path=f"/ws/threads/{thread_id}/"
    )

    await communicator.connect()
    closing = await communicator.receive_output()

    assert (closing["type"], closing["code"]) == ("websocket.close", CLOSE_FORBIDDEN)


async def test_unknown_thread_is_closed_like_a_forbidden_one() -> None:
    cookie = await _session_cookie("ada")
    communicator = _communicator(ORIGIN, (b"cookie", cookie), path="/ws/threads/nope/")

    await communicator.connect()
    closing = await communicator.receive_output()

    assert closing["code"] == CLOSE_FORBIDDEN


async def test_socket_from_a_foreign_origin_is_refused() -> None:
    communicator = _communicator(
        (b"origin", b"https://evil.example"),
        (b"cookie", await _session_cookie()),
        path="/ws/threads/t-1/",
    )

    connected, _ = await communicator.connect()

    assert not connected


async def test_reconnecting_with_after_misses_nothing() -> None:
    cookie = await _session_cookie("ada")
    thread_id, ids = await _thread_with_events("ada", 2)
    first = _communicator(
        ORIGIN, (b"cookie", cookie), path=f"/ws/threads/{thread_id}/?format=json"
    )
    await first.connect()
    await first.receive_json_from()
    seen = [(await first.receive_json_from())["id"] for _ in ids]
    await first.disconnect()
    missed = [await _append(thread_id, f"m{i}") for i in range(2)]  # while disconnected
    second = _communicator(
        ORIGIN,
        (b"cookie", cookie),
        path=f"/ws/threads/{thread_id}/?format=json&after={seen[-1]}",
    )
    await second.connect()
    await second.receive_json_from()

    caught_up = [(await second.receive_json_from())["id"] for _ in missed]

    assert caught_up == missed
    await second.disconnect()
    await asyncio.sleep(0)


@pytest.mark.parametrize(
    "path",
    ["/ws/threads/a/b/", "/ws/threads/", "/ws/nothing-here/", "/ws/threads/%2F/x/"],
)
async def test_a_socket_address_that_names_nothing_is_closed_with_4404(
    path: str,
) -> None:
    # before: the router raised in the handshake and Daphne answered with a 500
    cookie = await _session_cookie("ada")
    communicator = _communicator(ORIGIN, (b"cookie", cookie), path=path)

    await communicator.connect()
    closing = await communicator.receive_output()

    assert (closing["type"], closing["code"]) == ("websocket.close", CLOSE_NOT_FOUND)


async def test_frames_that_are_not_a_small_json_object_are_ignored() -> None:
    # before: binary, malformed or deeply nested frames closed the socket with 1011
    cookie = await _session_cookie("ada")
    thread_id, _ = await _thread_with_events("ada", 0)
    communicator = _communicator(
        ORIGIN, (b"cookie", cookie), path=f"/ws/threads/{thread_id}/?format=json"
    )
    await communicator.connect()
    assert (await communicator.receive_json_from())["type"] == "hello"

    for frame in (
        {"bytes_data": b"\x00\xff binary"},
        {"text_data": "not json at all"},
        {"text_data": "[" * 50_000 + "]" * 50_000},
        {"text_data": '{"after": NaN}'},
        {"text_data": '{"after": "7"}'},
        {"text_data": "x" * 100_000},
    ):
        await communicator.send_to(**frame)
    assert await communicator.receive_nothing(
        timeout=0.3
    )  # nothing sent, nothing closed

    new_id = await _append(thread_id, "still-open")
    live = await communicator.receive_json_from(timeout=3)
    assert live["id"] == new_id
    await communicator.disconnect()
